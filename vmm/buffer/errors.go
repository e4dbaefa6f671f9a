package buffer

import (
	"errors"
	"strings"
)

var (
	// ErrClosed is returned by every operation on a Buffer after its Close.
	ErrClosed = errors.New("buffer: closed")
	// ErrWouldMove is returned by Grow on a buffer made with Options.FixedBase when the
	// driver refused to extend the reservation in place, so that growing would have moved
	// the base address. The buffer is unchanged.
	ErrWouldMove = errors.New("buffer: growth would move the base address")
	// ErrOutOfRange is returned by ReadAt and WriteAt for ranges outside [0, Size).
	ErrOutOfRange = errors.New("buffer: out of range")
	// ErrTooLarge is returned for sizes whose rounding or doubling overflows 64 bits.
	ErrTooLarge = errors.New("buffer: size too large")
	// ErrBroken is returned once a rollback could not restore a mapping (the driver failed
	// twice in a row): the buffer's memory can no longer be trusted. Close still releases
	// everything it can.
	ErrBroken = errors.New("buffer: broken by a failed rollback")
	// ErrInvalid is returned for invalid arguments (a nil Manager, a bad Options field).
	ErrInvalid = errors.New("buffer: invalid argument")
)

// Error is the error of a failed Buffer operation: the operation, its arguments and the
// cause. It unwraps to the cause, so errors.Is(err, cu.ERROR_OUT_OF_MEMORY) and
// errors.Is(err, ErrClosed) work.
type Error struct {
	Op   string // "new", "grow", "shrink", "close", "read", "write"
	Args string // e.g. "to 6MiB (size 4MiB, committed 4MiB)"
	Err  error
}

func (e *Error) Error() string {
	s := "buffer: " + e.Op
	if e.Args != "" {
		s += " " + e.Args
	}
	return s + ": " + strings.TrimPrefix(e.Err.Error(), "buffer: ")
}

func (e *Error) Unwrap() error { return e.Err }
