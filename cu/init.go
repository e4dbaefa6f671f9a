package cu

import "sync"

var initOnce struct {
	sync.Once
	err error
}

// Init loads the driver and calls cuInit(0), once per process; every later call returns
// the first call's result. Functions of this package that need an initialized driver call
// it themselves.
func Init() error {
	initOnce.Do(func() {
		if err := lib.Load(); err != nil {
			initOnce.err = err
			return
		}
		if err := call(procInit, 0); err != nil {
			initOnce.err = wrap(err, "cuInit", "0")
		}
	})
	return initOnce.err
}

// DriverVersion returns the CUDA version the driver supports, as 1000*major + 10*minor
// (13000 for CUDA 13.0). It needs no cuInit.
func DriverVersion() (int, error) {
	var f frame
	f.ref(0, 0)
	if err := f.call(procDriverGetVersion); err != nil {
		return 0, wrap(err, "cuDriverGetVersion", "")
	}
	return int(int32(uint32(f.scratch[0]))), nil
}

// LibraryPath is the file the driver was loaded from, or "" if it could not be loaded.
func LibraryPath() string { return lib.Path() }
