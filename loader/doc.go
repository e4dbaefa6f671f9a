// Package loader opens the NVIDIA CUDA driver library at run time, without cgo, and resolves
// its entry points one symbol at a time.
//
// The library is opened lazily, on first use: libcuda.so.1 then libcuda.so on Linux,
// nvcuda.dll from System32 on Windows. Other systems get an error matching [ErrNoDriver] (and
// [ErrUnsupportedPlatform]). The path can be overridden with the CUVMM_LIBCUDA environment
// variable or with [Configure]; a path that names anything but a regular file (a FIFO, a
// directory, a device) is refused before the system loader sees it.
//
// Each [Proc] names one driver entry point and the CUDA ABI version its caller was written
// against. It is resolved through cuGetProcAddress_v2 when the driver has it (so the caller
// gets exactly the ABI it asked for, legacy default-stream semantics included) and otherwise
// through the versioned export name. A symbol that is missing, or present only in an older ABI
// than asked for, fails its own calls with a [*SymbolError] matching [ErrNotSupported];
// every other symbol keeps working.
//
// # A driver that arrives later
//
// A node agent (a Kubernetes DaemonSet, say) is often started before the GPU operator's
// driver container has installed the driver. It need not be restarted: a failed load is
// tried again by a later use once a backoff has passed (one second after the first failure,
// doubling up to 30 seconds), or at once by [Library.Retry] when the program learns that the
// driver is there. However many goroutines use the library meanwhile, at most one attempt
// runs per interval. Procs that failed only because there was no driver resolve after the
// late load. A successful load is final: every symbol comes from that one file, and
// [Configure] is refused from then on.
//
// [NVML] is a second library opened the same way (the same checks, the same retry) for
// package nvml: libnvidia-ml.so.1, or nvml.dll on Windows, overridden by CUVMM_LIBNVML. NVML
// has no cuGetProcAddress, so its symbols are looked up by export name.
//
// The package only finds addresses; calling them is the job of packages cu and nvml.
package loader
