package vmm

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
)

var (
	// ErrClosed is returned by operations on an Allocation, Reservation or Mapping after
	// its Close.
	ErrClosed = errors.New("vmm: already closed")
	// ErrOutOfRange is returned for offsets and sizes outside the object they name.
	ErrOutOfRange = errors.New("vmm: out of range")
)

// Error is the error of a failed VMM operation: what was asked, with which arguments, and
// why it failed. It unwraps to the backend's error, so errors.Is(err, cu.ERROR_INVALID_VALUE)
// and cu.ResultOf work.
type Error struct {
	Op   string // "create", "reserve", "map", ...
	Args string // e.g. "0x302000000+2MiB offset 0"
	Err  error
}

func (e *Error) Error() string {
	if e.Args == "" {
		return "vmm: " + e.Op + ": " + Cause(e.Err)
	}
	return "vmm: " + e.Op + " " + e.Args + ": " + Cause(e.Err)
}

// Cause describes err for a message that already names the call: the driver's result and,
// in parentheses, the backend's explanation if it has one. The backend's own description of
// the call ("cu: cuMemMap(...)", "sim: cuMemMap(...)") would repeat the caller's.
func Cause(err error) string {
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

func (e *Error) Unwrap() error { return e.Err }

func opErr(err error, op, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Args: fmt.Sprintf(format, args...), Err: err}
}

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
