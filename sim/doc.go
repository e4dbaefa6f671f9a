// Package sim is a software CUDA driver for the virtual memory management API: a
// [vmm.Backend] entirely in Go, so programs and tests written against cuvmm run without a
// GPU and get the real driver's results, byte for byte and error for error.
//
// Build one from a preset or from a [Config] of your own. The presets ([Presets] names
// them, [Preset] finds one by name) are real machines, [PresetH100], [PresetH200],
// [PresetHGX8] (eight H200s on NVSwitches, which agrees with a recorded host of four),
// [PresetMNNVL] (a multi-node NVLink tray with an IMEX channel), [PresetOldGPU] (a K80 on
// R470: no VMM) and [PresetWorkstation] (an RTX A6000), and such machines broken one way
// each: [PresetHGX8FabricManagerDown], [PresetHGX8Degraded], [PresetMNNVLNoChannel],
// [PresetH200NoNVML]:
//
//	s, err := sim.New(sim.PresetH200())
//
// What it models: devices and their attributes (recorded from real H100 and H200 GPUs),
// granularity, physical allocations with per-device capacity, reservations, mappings and
// their access flags, copies and memset through mappings, aliases, retain and release
// semantics (memory released while mapped keeps its bytes until the last unmap), POSIX
// descriptors that really cross processes (on Linux every export on one memfd, as the
// driver opens every export on /dev/nvidiactl), fabric handles (with IMEX),
// dma-buf export as the driver does it (a descriptor that [DmaBufInfo] describes in any
// process), multicast objects, and every error case the conformance suite (package
// vmm/vmmtest) recorded on real GPUs. Unknown handle values, which crash the real driver, return
// CUDA_ERROR_INVALID_VALUE.
//
// What it does not model: kernels, streams and timing. See docs/sim.md.
//
// For tests, [Sim.FailNth] makes the Nth call of an operation fail with a chosen result,
// [Sim.SetCapacity] caps a device's memory, and [Sim.Stats] counts what is live so that a
// test can prove it leaks nothing.
//
// Memory costs nothing until written: reservations and mappings are entries in balanced
// trees (O(log n) per operation), and physical memory is backed by host memory one 64 KiB
// page at a time on first write; untouched memory reads as zeros.
//
// A Sim serializes its calls on one lock, as the driver serializes its VMM work, and is
// deterministic: the same sequence of calls gives the same addresses and handle values.
package sim
