package nvml

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/loader"
)

// Error is the error of a failed NVML call: which call, with which arguments, and what it
// returned (a Return), or why it could not be made (the library or the entry point is
// missing).
type Error struct {
	Op   string // the NVML function, e.g. "nvmlDeviceGetGpuFabricInfoV"
	Args string // its arguments, for people; "" when it takes none worth naming
	Err  error
}

func (e *Error) Error() string {
	if e.Args == "" {
		return "nvml: " + e.Op + ": " + e.Err.Error()
	}
	return "nvml: " + e.Op + "(" + e.Args + "): " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// unavailable is the error of a call that could not be made: the loader's error, which
// also matches the NVML result a C program would have got from a loader stub
// (NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND).
type unavailable struct {
	err error
	ret Return
}

func (e *unavailable) Error() string   { return e.err.Error() }
func (e *unavailable) Unwrap() []error { return []error{e.err, e.ret} }

// symbolErr turns the loader's error for an entry point into unavailable. For a library
// that did not load, the *LoadError says everything: the entry point's name is already the
// Op of the Error around it.
func symbolErr(err error) error {
	var se *loader.SymbolError
	if errors.As(err, &se) && se.Status == loader.DriverNotLoaded {
		if se.Err != nil {
			err = se.Err
		}
		return &unavailable{err: err, ret: ERROR_LIBRARY_NOT_FOUND}
	}
	return &unavailable{err: err, ret: ERROR_FUNCTION_NOT_FOUND}
}

// wrap names the call p of a failed call and its arguments; it is reached only on failure.
func wrap(err error, p *loader.Proc, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Op: p.Symbol().Name, Args: fmt.Sprintf(format, args...), Err: err}
}
