// Package loader opens the NVIDIA CUDA driver library at run time, without cgo, and resolves
// its entry points one symbol at a time.
//
// The library is opened once, lazily, on first use: libcuda.so.1 then libcuda.so on Linux,
// nvcuda.dll from System32 on Windows. Other systems get an error matching [ErrNoDriver] (and
// [ErrUnsupportedPlatform]). The path can be overridden with the CUVMM_LIBCUDA environment
// variable or with [Configure] before first use.
//
// Each [Proc] names one driver entry point and the CUDA ABI version its caller was written
// against. It is resolved through cuGetProcAddress_v2 when the driver has it (so the caller
// gets exactly the ABI it asked for, legacy default-stream semantics included) and otherwise
// through the versioned export name. A symbol that is missing, or present only in an older ABI
// than asked for, fails its own calls with a [*SymbolError] matching [ErrNotSupported];
// every other symbol keeps working.
//
// The package only finds addresses; calling them is the job of package cu.
package loader
