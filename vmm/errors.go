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
	cause := e.Err
	// The backend's own prefix ("cu: cuMemMap(...): ") repeats what Op and Args say.
	var ce *cu.Error
	if errors.As(cause, &ce) {
		cause = ce.Err
	}
	if e.Args == "" {
		return "vmm: " + e.Op + ": " + cause.Error()
	}
	return "vmm: " + e.Op + " " + e.Args + ": " + cause.Error()
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
