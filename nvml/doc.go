// Package nvml is NVML through loader, for the preflight: what vmmprobe needs to know about
// a node's NVLink fabric (Fabric Manager / IMEX / NVLS readiness) and nothing more.
//
// NVML is opened like the CUDA driver ([loader.NVML]: libnvidia-ml.so.1, or nvml.dll on
// Windows; purego, no cgo; the same regular-file check and retry), and each entry point is
// resolved on its own. A missing library fails every call with an error matching both
// [ERROR_LIBRARY_NOT_FOUND] and [loader.ErrNoDriver]; a missing entry point fails only its
// own calls, matching [ERROR_FUNCTION_NOT_FOUND] and [loader.ErrNotSupported]. Nothing here
// panics on what NVML returns.
//
// [Probe] takes the snapshot the preflight reads: the driver version, and per GPU its name,
// UUID, PCI bus id, fabric state, status, clique, cluster and health, and its NVLinks. A
// fact NVML cannot give (library or entry point missing, NVML_ERROR_NOT_SUPPORTED, any
// other failure) is recorded as unknown with the reason instead of stopping the probe, and
// [Node] is plain data, so a simulator can make one.
//
// The calls under Probe are exported in go-nvml's shape ([Init], [DeviceGetHandleByIndex],
// [Device.GpuFabricInfo], ...). Every struct layout, constant and version macro is nvml.h's
// (NVML_API_VERSION 13); layout_test.go checks them.
package nvml
