package cu

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/loader"
)

// call invokes a driver entry point and turns its CUresult into an error. A symbol that
// did not resolve returns its *loader.SymbolError, joined with ERROR_NOT_SUPPORTED so that
// callers who only know cu's results can still test for it.
//
// The driver calls themselves do not go through call: each generated function (zcalls.go)
// builds its own frame (frame.go) and makes the call, values only or not, because one more
// Go function between a call and the driver measured several percent of a cuMemMap
// (BenchmarkGPUCallLayers). call is what callKeep, and the tests, build on. It allocates
// nothing, and args is only read, so its backing array stays in the caller's frame. The memory rule of syscall.go applies: a pointer among
// args must point to heap memory kept alive for the call; pointers into memory that cu does
// not control (a user's slice, a result made with new) go through callKeep instead.
func call(p *loader.Proc, args ...uintptr) error {
	if len(args) > maxSyscallArgs {
		panic("cu: driver call with more than 6 arguments")
	}
	var f frame
	copy(f.a[:], args)
	return f.call(p)
}

// callKeep is call for pointer arguments into memory that cu does not own. Being
// //go:uintptrescapes, it makes the compiler move the pointee of every
// uintptr(unsafe.Pointer(x)) argument to the heap and keep it alive until callKeep returns,
// as for syscall.Syscall. That costs an allocation for the arguments (and for the pointee,
// if it would otherwise have lived on the stack), so only the calls on user memory, and the
// few whose arguments do not fit a frame, use it.
//
//go:uintptrescapes
func callKeep(p *loader.Proc, args ...uintptr) error {
	return call(p, args...)
}

func symbolErr(err error) error {
	var se *loader.SymbolError
	if errors.As(err, &se) && se.Status != loader.DriverNotLoaded {
		return &notSupported{err}
	}
	return err
}

// notSupported is a missing symbol's error: its text is the loader's, and it matches both
// loader.ErrNotSupported and cu.ERROR_NOT_SUPPORTED.
type notSupported struct{ err error }

func (e *notSupported) Error() string   { return e.err.Error() }
func (e *notSupported) Unwrap() []error { return []error{e.err, ERROR_NOT_SUPPORTED} }

// Error is the error of a failed driver call: which call, with which arguments, and the
// driver's result (or the symbol error) it returned. errors.Is(err, cu.ERROR_INVALID_VALUE)
// and errors.As(err, &res) with a Result reach the result.
type Error struct {
	Op   string // the driver call, e.g. "cuMemMap"
	Args string // its arguments, formatted for people
	Err  error  // a Result, or a loader error
}

func (e *Error) Error() string {
	if e.Args == "" {
		return "cu: " + e.Op + ": " + e.Err.Error()
	}
	return "cu: " + e.Op + "(" + e.Args + "): " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// wrap names the operation of a failed call; it is only reached on failure, so the
// formatting costs nothing on the fast path.
func wrap(err error, op string, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Args: fmt.Sprintf(format, args...), Err: err}
}

// ResultOf returns the driver result inside err, and false if err holds none (a Go-side
// validation error, or a driver that could not be loaded). A missing symbol reports
// ERROR_NOT_SUPPORTED.
func ResultOf(err error) (Result, bool) {
	var r Result
	if errors.As(err, &r) {
		return r, true
	}
	return 0, false
}
