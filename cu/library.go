package cu

import "github.com/cuvmm/cuvmm/loader"

// lib is the driver library. Its procs, one per driver entry point cu calls, are in
// zprocs.go, generated from the prototype lines of prototypes.go.
var lib = loader.Default()

// Symbols lists every driver entry point cu may call, with its resolution state once
// resolved; for tools that report what a driver provides.
func Symbols() []*loader.Proc { return lib.Procs() }

// OptionalSymbol reports whether the driver entry point name (a Symbols entry's
// Symbol().Name) is optional: newer than the CUDA version cuvmm is built for, so that
// drivers cuvmm supports may lack it; cu calls it only where the driver has it, and its
// absence is not a defect of the driver (cuMulticastBindMem_v2 and cuMulticastBindAddr_v2,
// CUDA 13.1).
func OptionalSymbol(name string) bool { return optionalSymbol(name) }
