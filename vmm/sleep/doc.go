// Package sleep gives GPU memory back between phases of a program and keeps every
// address: what reinforcement-learning trainers do with an inference engine between
// rollouts (vLLM's sleep mode, SGLang's memory saver), over the VMM API.
//
// A Pool allocates Regions under tags; each Region is one range of device addresses made
// of chunks (allocations of Options.Chunk bytes, 64 MiB by default), mapped read-write for
// its device. Sleep puts every chunk of a tag to sleep in one of three modes and Wake
// brings them back, at the same addresses, so pointers baked into CUDA graphs and kernels
// stay valid:
//
//   - Offload copies the bytes to host memory and releases the device memory; Wake
//     recreates it, maps it where it was and copies the bytes back.
//   - Park copies the bytes to host memory and maps that host memory at the same addresses
//     for the device: a kernel that touches the range while it sleeps reads and writes it
//     (over the host link), instead of faulting. Wake moves the bytes back.
//   - Discard releases the device memory; Wake gives fresh memory that reads zero.
//
// Each chunk has a State (resident, offloaded, parked, discarded) and each call moves only
// the chunks it applies to: sleeping twice is sleeping once, waking twice waking once, a
// Region or the Pool can be closed in any state, and a call that fails midway leaves every
// chunk in a state of its own, consistent, with nothing leaked, so that the call can be
// retried. A Wake that finds too little device memory says how much the tag needs and how
// much is free, and leaves the chunks it did not wake asleep with their bytes.
//
// Host memory is VMM host memory (cuMemCreate on the host), mapped for the device, so the
// copies are device-to-device copies, which run at the host link's speed (50 GiB/s into
// host VMM memory on an H200). Creating host memory pins it, which is an order of magnitude
// slower than the copy: Prepare makes it ahead, and it is kept for the next sleep unless
// Options.ReleaseHost (or until Pool.ReleaseHost). The copy of one chunk overlaps the
// release of the one before (and on Wake, the creation and mapping of one the copy of the
// one before), in two goroutines.
//
// Memory made elsewhere sleeps too: Pool.Tag puts any Memory under a tag, that is memory
// laid out in vmm.Regions (a *buffer.Buffer, a *sparse.Array, a *vmm.Region a caller
// made). It stays its owner's, who may change it while it is awake (a buffer grows or moves,
// an array commits pages): each Sleep and Wake takes what it holds then. While a chunk of a
// region sleeps, the region refuses its owner's changes with ErrAsleep (a buffer's Grow and
// Shrink, an array's Commit and Decommit). A woken chunk is memory made as its owner made
// it (the same properties), at the same addresses.
//
// The rules. Memory exported to another process or device (a POSIX descriptor, a fabric
// handle, a dma-buf of its range) or imported from one must not sleep: the other side holds
// the allocation, so nothing would be freed, and the two sides would stop seeing the same
// bytes. Tag and Sleep refuse it with ErrShared (vmm.Allocation.Shared says which memory
// is such; a dma-buf marks the memory it was exported from for good, as a descriptor handed
// on may live anywhere). Only exports made through the memory's own objects mark it: a
// dma-buf exported by address alone (vmm.Manager.ExportDmaBuf), or a descriptor of an
// Allocation retained at its address, is not seen, so export tagged memory through its
// owner (a buffer's ExportDmaBuf, a Region's chunks). A Pool's own memory is never exported. Nothing may read or write an
// offloaded or discarded range (ReadAt and WriteAt fail with ErrAsleep; device code would
// fault), and nothing may touch a tag while it sleeps or wakes.
package sleep
