// Package vmm is CUDA virtual memory management in Go: physical allocations, virtual
// address reservations, mappings and access, sharing between processes, and multicast,
// over one [Backend] interface that the real driver ([CUDA]) and the simulator (package
// sim) both implement.
//
// The typed layer, [Manager], turns handles and address ranges into values with an
// idempotent Close ([Allocation], [Reservation], [Mapping], [Multicast]) and errors that
// name the operation and its arguments and wrap the driver's result:
//
//	vmm: map 0x302000000+2MiB: CUDA_ERROR_INVALID_VALUE: ...
//
// so errors.Is(err, cu.ERROR_INVALID_VALUE) and cu.ResultOf(err) work.
//
// # Where to start
//
// Open a backend ([CUDA], or sim.New for a machine without a GPU), make a [Manager] with
// [New], and create, reserve and map as the package example does. Most programs want a
// building block instead of raw mappings: vmm/buffer grows one range of addresses without
// copying, vmm/sparse commits the pages of a large array on first use, vmm/peer shares
// memory between GPUs, vmm/ipc and vmm/ipc/pidfd between processes. vmm/vmmtest checks a
// Backend against the driver's recorded results. docs/benchmarks.md has what the calls
// cost on H100 and H200 GPUs next to C and cgo.
//
// # Errors
//
// Every package of cuvmm reports failures as an [*Error] (package, operation, arguments,
// cause) and the same conditions with the same sentinels: [ErrClosed], [ErrInvalid],
// [ErrOutOfRange], [ErrWouldMove], [ErrTooLarge], [ErrBroken]. errors.Is(err, vmm.ErrClosed)
// holds for a closed Allocation and a closed buffer alike.
//
// # dma-buf
//
// [Reservation.ExportDmaBuf], [Manager.ExportDmaBuf] and the building blocks' exports give
// an RDMA NIC one dma-buf descriptor ([DmaBuf]) for a whole range, however many mappings
// back it, after checking the rules the driver keeps: [ErrMisaligned], [ErrHole],
// [ErrMixedDevices], [ErrUnsupported] say which one a range breaks (docs/rdma.md).
//
// # Transactions
//
// An operation that takes several driver calls runs as a [Tx]: each step records its undo,
// and a failure rolls back what was done, so the object is unchanged and nothing leaks.
// Releases the driver refuses during a rollback wait in a [Pending] list for a retry. The
// building blocks (packages buffer, sparse, peer, ipc) are made this way, on the typed
// layer.
//
// # Safety
//
// The real driver crashes the process when given a handle value it does not know. No
// handle reaches it through this package or package cu unless the driver returned it and
// it has not been released since; others fail with an error matching
// cu.ERROR_INVALID_VALUE. Nil and zero values of the typed layer fail with ErrInvalid
// rather than panic.
//
// # What the driver accepts
//
// Mappings cover whole allocations (cuMemMap with a partial size or a non-zero offset
// returns CUDA_ERROR_NOT_SUPPORTED), access is set on whole mappings (one call may cover
// several adjacent ones: [Reservation.SetAccess]), one unmap may cover several mappings
// and the gaps between them ([Reservation.Unmap]), and a reservation is freed whole and
// only once nothing is mapped in it. The conformance suite in vmm/vmmtest records every
// such rule as the driver returned it.
//
// # Concurrency
//
// Backends, the Manager and the typed values are safe for concurrent use, and no lock is
// shared by unrelated work: package cu keeps its handle table without a process-wide lock
// (a call on one handle waits only for a release of that same handle), and an Allocation,
// Reservation or Mapping pins itself for each call, without a lock, so that Close waits
// for the calls in flight and no call reaches the driver after Close has begun.
//
// The driver serializes most of its VMM bookkeeping: many goroutines making VMM calls gain
// little over one, and a process that makes many of them runs them faster holding a context
// (cu.Device.Primary). docs/benchmarks.md has the measurements.
package vmm
