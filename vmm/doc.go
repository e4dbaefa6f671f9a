// Package vmm is CUDA virtual memory management in Go: physical allocations, virtual
// address reservations, mappings and access, sharing between processes, and multicast,
// over one [Backend] interface that the real driver ([CUDA]) and the simulator (package
// sim) both implement.
//
// The typed layer, [Manager], turns handles and address ranges into values with an
// idempotent Close ([Allocation], [Reservation], [Mapping], [Multicast]) and errors that
// name the operation and its arguments and wrap the driver's result:
//
//	vmm: map 0x302000000+2MiB offset 0: CUDA_ERROR_NOT_SUPPORTED: ...
//
// so errors.Is(err, cu.ERROR_NOT_SUPPORTED) and cu.ResultOf(err) work.
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
// Measured on an H200 (driver 580.159.04, 16 CPU cores) with bench/cgo's
// BenchmarkConcurrency, workers each creating, mapping, setting access, unmapping and
// releasing their own 2 MiB chunks, cuvmm goroutines against C threads calling the driver
// directly, in one process: 1.10x, 1.00x, 0.98x, 0.99x and 0.94x of C's throughput at 1, 2,
// 4, 8 and 16 workers (a plain cgo binding: 1.09x, 1.00x, 1.01x, 0.99x, 0.95x); with
// goroutines mapping, querying and exporting shared handles while others create and
// release theirs, 1.00x, 0.99x, 0.98x, 0.95x and 0.96x (cgo 0.94x to 1.00x). The process
// spends as much CPU time per operation as with the cgo binding (within 2% on own handles)
// and allocates about once per 500 operations. A second run the same day measured 0.97x to
// 1.06x at 1 to 8 workers and 0.89x at 16 on own handles (cgo 0.96x there), and 0.94x to
// 1.06x on shared handles, and a third 1.00x to 1.08x at 1 to 8 workers and 0.91x at 16 on
// own handles (cgo 0.95x), 0.94x to 0.99x on shared (cgo 0.94x to 1.01x). On an H100 host:
// 0.92x at 1 worker (cgo 0.93x; both Go bindings spend 12% more CPU time per operation than
// a C thread there), 0.98x to 1.06x at 2 to 8 and 0.93x at 16 (cgo 0.97x) on own handles,
// 0.96x to 0.98x on shared. Cells near 0.95x move by several points from run to run, for
// the cgo binding as for cuvmm. The driver itself serializes most of its VMM
// bookkeeping: 16 threads do about 1.7 times the operations per second of one on their own
// handles. docs/benchmarks.md has the tables and how to reproduce them.
package vmm
