package cu

import (
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/loader"
)

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

var initState struct {
	mu   sync.Mutex
	done atomic.Bool // err is cuInit's result, for good
	err  error
}

// Init loads the driver and calls cuInit(0). Functions of this package that need an
// initialized driver call it themselves.
//
// A driver library that cannot be loaded is not final: the loader tries again after its
// backoff (see package loader), so a process started before the driver was installed
// initializes on a later call. Once the library is loaded, cuInit is called once and every
// later call returns its result, failure included (the driver keeps a failed cuInit for the
// life of the process too).
func Init() error {
	if initState.done.Load() {
		return initState.err
	}
	return initSlow()
}

func initSlow() error {
	initState.mu.Lock()
	defer initState.mu.Unlock()
	if initState.done.Load() {
		return initState.err
	}
	if err := lib.Load(); err != nil {
		return err
	}
	initState.err = wrap(cuInit(0), "cuInit", "0")
	initState.done.Store(true)
	return initState.err
}

// DriverVersion returns the CUDA version the driver supports, as 1000*major + 10*minor
// (13000 for CUDA 13.0). It needs no cuInit.
func DriverVersion() (int, error) {
	v, err := cuDriverGetVersion()
	if err != nil {
		return 0, wrap(err, "cuDriverGetVersion", "")
	}
	return int(v), nil
}

// LibraryPath is the file the driver was loaded from, or "" if it could not be loaded.
func LibraryPath() string { return lib.Path() }
