package cu

import "github.com/cuvmm/cuvmm/loader"

// lib is the driver library. Its procs, one per driver entry point cu calls, are in
// zprocs.go, generated from the prototype lines of prototypes.go.
var lib = loader.Default()

// Symbols lists every driver entry point cu may call, with its resolution state once
// resolved; for tools that report what a driver provides.
func Symbols() []*loader.Proc { return lib.Procs() }
