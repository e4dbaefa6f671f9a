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
	// The backend's own description of the call ("cu: cuMemMap(...)") repeats what Op and
	// Args say: show the driver's result, and the backend's explanation if it has one.
	cause := e.Err.Error()
	if r, ok := cu.ResultOf(e.Err); ok {
		cause = r.Error()
		var x Explainer
		if errors.As(e.Err, &x) && x.Explain() != "" {
			cause += " (" + x.Explain() + ")"
		}
	}
	if e.Args == "" {
		return "vmm: " + e.Op + ": " + cause
	}
	return "vmm: " + e.Op + " " + e.Args + ": " + cause
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
