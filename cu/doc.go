// Package cu is the typed CUDA driver API that cuvmm needs: results as Go errors, devices
// and their attributes, primary contexts, synchronous copies, and the virtual memory
// management calls, all through the run-time loader (no cgo).
//
// Most programs should start at package vmm instead: its Manager turns these calls into
// values with an idempotent Close and errors that name their arguments, runs the same code
// on the simulator (package sim) without a GPU, and the building blocks (vmm/buffer,
// vmm/sparse, vmm/peer, vmm/ipc) are written on it. Use cu directly for a driver call vmm
// does not wrap, or to hold a handle without the typed layer's bookkeeping.
//
// Every driver call this package makes is declared once, as a prototype line in
// prototypes.go with the ABI version it is called with; internal/cmd/mkcu checks the lines
// against cuda.h and generates the proc table (zprocs.go) and the functions that make the
// calls (zcalls.go), on which the exported functions are written. A missing entry point
// fails only its own calls, with an error that matches both [loader.ErrNotSupported] and
// [ERROR_NOT_SUPPORTED].
//
// # Contexts
//
// The VMM calls (create, reserve, map, set access, ...) need no current context and run on
// any goroutine. Copies, memsets and synchronization do; they run through a [Context], which
// makes the device's primary context current on a locked OS thread for the call and unlocks
// it afterwards, so callers never manage thread-bound state.
//
// # Handle safety
//
// The driver dereferences a CUmemGenericAllocationHandle it does not know and kills the
// process. Every [MemHandle] this package hands out is recorded with its reference count
// (created, imported, retained, multicast), and a call with any other value returns
// [ErrUnknownHandle] instead of reaching the driver.
//
// No lock shared by calls on different handles is held across a driver call. Calls on one
// handle pin it without a lock; its last [MemRelease] waits for those in flight. The calls
// that can free or revive one allocation (its releases, unmaps of its mappings, a retain
// through one of them) take that allocation's own lock across their driver call, so that
// the driver never sees two of them at once.
//
// One race this cannot cover is the program's own: a [MemUnmap] of a range that a [MemMap]
// on another goroutine is mapping into, before that MemMap returns. cu learns of a mapping
// only once the driver has made it, so such an unmap may drop it unlocked, alongside the
// allocation's last release, which can corrupt the driver's heap as it would in C. Order a
// range's maps and unmaps, as package vmm's Reservation does.
package cu
