package vmm

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
)

// The conditions every package of cuvmm reports the same way: errors.Is(err, ErrClosed)
// holds for a closed Allocation, buffer, sparse array, peer memory or import alike.
var (
	// ErrClosed: the object was closed.
	ErrClosed = errors.New("closed")
	// ErrInvalid: an argument is invalid (a nil or zero value, a bad option), caught
	// before any driver call. It also matches cu.ERROR_INVALID_VALUE, the result a
	// driver that checked would return.
	ErrInvalid error = invalidError{}
	// ErrOutOfRange: an offset or size outside the object it names.
	ErrOutOfRange = errors.New("out of range")
	// ErrWouldMove: growing would move the base address of memory that must not move.
	ErrWouldMove = errors.New("growth would move the base address")
	// ErrTooLarge: a size whose rounding or growth overflows 64 bits.
	ErrTooLarge = errors.New("size too large")
	// ErrBroken: a rollback could not restore what it undid (the driver failed twice in a
	// row); the object's memory can no longer be trusted, and only Close still works.
	ErrBroken = errors.New("broken by a failed rollback")
)

type invalidError struct{}

func (invalidError) Error() string { return "invalid argument" }

func (invalidError) Is(target error) bool { return target == cu.ERROR_INVALID_VALUE }

// Error is the error of a failed operation of cuvmm's typed layer and building blocks: the
// package and operation, its arguments, and why it failed. It unwraps to the cause, so
// errors.Is(err, ErrClosed), errors.Is(err, cu.ERROR_OUT_OF_MEMORY) and cu.ResultOf work.
type Error struct {
	Pkg  string // "vmm", "buffer", "sparse", "peer", "ipc"; empty means "vmm"
	Op   string // "create", "map", "grow", ...
	Args string // e.g. "0x302000000+2MiB offset 0"
	Err  error
}

func (e *Error) Error() string {
	pkg := e.Pkg
	if pkg == "" {
		pkg = "vmm"
	}
	return pkg + ": " + e.describe()
}

// describe is the message without the package: an Error that wraps another (a buffer's
// grow failing in the typed layer's map) reads as one sentence.
func (e *Error) describe() string {
	s := e.Op
	if e.Args != "" {
		s += " " + e.Args
	}
	return s + ": " + Cause(e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Cause describes err for a message that already names the call: the driver's result and,
// in parentheses, the backend's explanation if it has one. The backend's own description of
// the call ("cu: cuMemMap(...)", "sim: cuMemMap(...)") would repeat the caller's.
func Cause(err error) string {
	if inner, ok := err.(*Error); ok {
		return inner.describe()
	}
	r, ok := cu.ResultOf(err)
	if !ok {
		return err.Error()
	}
	cause := r.Error()
	var x Explainer
	if errors.As(err, &x) && x.Explain() != "" {
		cause += " (" + x.Explain() + ")"
	}
	return cause
}

// CallError names one failed backend call inside a larger operation, for packages built on
// vmm ("map 0x7f0000200000+2MiB handle 0x3: CUDA_ERROR_..."). It unwraps to the backend's
// error.
type CallError struct {
	Call string
	Err  error
}

func (e *CallError) Error() string { return e.Call + ": " + Cause(e.Err) }

func (e *CallError) Unwrap() error { return e.Err }

// Call returns nil for a nil err, else a *CallError naming the call. Format it only on
// failure: callers on hot paths check err first.
func Call(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &CallError{Call: fmt.Sprintf(format, args...), Err: err}
}

// Explainer is implemented by backend errors that can say why a call was refused beyond
// the driver's result (the simulator does); Error adds it in parentheses.
type Explainer interface {
	Explain() string
}

func opErr(err error, op, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Args: fmt.Sprintf(format, args...), Err: err}
}

// invalid is ErrInvalid saying what was wrong.
func invalid(why string) error { return fmt.Errorf("%w: %s", ErrInvalid, why) }

// Size formats a byte count the way the error messages do: exact binary units where they
// divide evenly (2MiB, 64GiB), bytes otherwise.
func Size(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d%s", n, units[i])
}

// AlignUp rounds n up to a multiple of align (a power of two).
func AlignUp(n, align uint64) uint64 {
	if align == 0 {
		return n
	}
	return (n + align - 1) &^ (align - 1)
}
