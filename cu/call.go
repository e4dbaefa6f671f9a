package cu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cuvmm/cuvmm/loader"
)

// call invokes a driver entry point and turns its CUresult into an error. A symbol that
// did not resolve returns its *loader.SymbolError, joined with ERROR_NOT_SUPPORTED so that
// callers who only know cu's results can still test for it.
//
// call allocates nothing: it goes through syscall6 (see syscall.go), whose fast path keeps
// the arguments on the stack, and args is only read, so its backing array stays in the
// caller's frame. The price is that call is not //go:uintptrescapes: pointer arguments must
// point to heap memory the caller keeps alive for the call, and never to the stack. Every
// out-parameter comes from outPool (getOut, alive until putOut). Pointers into memory that
// cu does not control, or that the compiler could place on the stack (a user's slice, a
// result made with new), go through callKeep instead.
func call(p *loader.Proc, args ...uintptr) error {
	addr, err := p.Addr()
	if err != nil {
		return symbolErr(err)
	}
	if r := syscallN(addr, args); uint32(r) != 0 {
		return Result(int32(uint32(r)))
	}
	return nil
}

// callKeep is call for pointer arguments that do not point to pooled scratch memory. Being
// //go:uintptrescapes, it makes the compiler move the pointee of every
// uintptr(unsafe.Pointer(x)) argument to the heap and keep it alive until callKeep returns,
// as for syscall.Syscall. That costs an allocation for the arguments (and for the pointee,
// if it would otherwise have lived on the stack), so only the calls on user memory use it.
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

// out is scratch memory for a call's out-parameters. Taking the address of a local would
// move it to the heap on every call; pooling keeps the fast queries allocation-free.
type out struct {
	u64  [4]uint64
	prop MemAllocationProp
	loc  MemLocation
	mc   MulticastObjectProp
}

var outPool = sync.Pool{New: func() any { return new(out) }}

func getOut() *out  { return outPool.Get().(*out) }
func putOut(o *out) { outPool.Put(o) }

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
