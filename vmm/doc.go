// Package vmm is CUDA virtual memory management in Go: physical allocations, virtual
// address reservations, mappings and access, sharing between processes, and multicast,
// over one [Backend] interface that the real driver ([CUDA]) and the simulator (package
// sim) both implement.
//
// The typed layer, [Manager], turns handles and address ranges into values with an
// idempotent Close ([Allocation], [Reservation], [Mapping]) and errors that name the
// operation and its arguments and wrap the driver's result:
//
//	vmm: map 0x302000000+2MiB offset 0: CUDA_ERROR_NOT_SUPPORTED: ...
//
// so errors.Is(err, cu.ERROR_NOT_SUPPORTED) and cu.ResultOf(err) work.
//
// # Safety
//
// The real driver crashes the process when given a handle value it does not know. No
// handle reaches it through this package or package cu unless the driver returned it and
// it has not been released since; others fail with an error matching
// cu.ERROR_INVALID_VALUE (cu.ErrUnknownHandle).
//
// # What the driver accepts
//
// Mappings cover whole allocations (cuMemMap with a partial size or a non-zero offset
// returns CUDA_ERROR_NOT_SUPPORTED), access is set on whole mappings, and a reservation is
// freed whole and only once nothing is mapped in it. The conformance suite in vmm/vmmtest
// records every such rule as the driver returned it.
//
// # Concurrency
//
// Backends and the Manager are safe for concurrent use. The driver serializes its own
// bookkeeping; concurrent operations on different objects do not wait for each other in
// Go beyond the handle table's read lock.
package vmm
