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
// Measured on an H100 (driver 580.159.04, 16 CPU cores) with bench/cgo's
// BenchmarkConcurrency, workers each creating, mapping, setting access, unmapping and
// releasing their own 2 MiB chunks, cuvmm goroutines against C threads calling the driver
// directly, in one process that holds no context: 1.04x, 1.03x, 0.94x, 0.98x and 0.93x of
// C's throughput at 1, 2, 4, 8 and 16 workers (a plain cgo binding: 1.03x, 1.02x, 0.95x,
// 0.97x, 0.93x); with goroutines mapping, querying and exporting shared handles while others
// create and release theirs, 0.97x, 0.99x, 0.94x, 0.95x and 0.95x (cgo 0.96x to 1.01x). In
// a process that holds the primary context, 0.94x to 1.05x on own handles and 0.96x to 1.00x
// on shared ones (cgo 0.93x to 1.00x). Cells near 0.95x move by several points from run to
// run, for the cgo binding as for cuvmm; four earlier runs (three on an H200) put cuvmm at
// 0.89x to 0.94x at 16 workers on own handles. What keeps both Go bindings under C threads
// there is the crossing from Go into C for every driver call: the same C worker loop run on
// the Go runtime's threads, one cgo call per worker, stayed at 0.965x C or more from 4
// workers on, while per-call crossings cost the process about 0.3 more blocked threads and
// 10% to 14% more CPU time per operation on own handles at 8 and 16 workers, for cgo and
// cuvmm alike. Locking goroutines to their threads does not change it. cuvmm's handle
// table costs about 2 points more at 16 workers and about 1 at one worker (medians of
// eight runs, whose spread is wider). The process allocates about once per 80 to 500
// operations.
//
// The driver serializes most of its VMM bookkeeping, and how much depends on whether the
// process holds a context (a primary context retained, as any process that launches
// kernels or copies has; none need be current): without one, one thread did about 32
// thousand operations per second on its own handles and 16 threads 1.4 times that; with
// one, one thread did about 62 thousand and 16 threads 0.8 times that. So many goroutines
// making VMM calls gain little over one, and in a process with a context none; and a
// process that makes many VMM calls without ever needing a context still runs them about
// twice as fast holding one (cu.Device.Primary), at the cost of the context's device memory.
// docs/benchmarks.md has the tables and how to reproduce them.
package vmm
