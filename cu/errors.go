package cu

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnknownHandle is returned, instead of calling the driver, for a MemHandle that this
	// process never obtained from the driver or has already released: the driver would
	// dereference it and crash the process.
	// It matches ERROR_INVALID_VALUE, the result a driver that checked would return.
	ErrUnknownHandle error = &argError{msg: "cu: unknown or released allocation handle"}
	// ErrContextReleased is returned by calls through a Context after its Release.
	ErrContextReleased = errors.New("cu: context released")
	// ErrInvalidArgument matches argument errors caught before the driver is called (empty
	// buffers, sizes that do not fit). It also matches ERROR_INVALID_VALUE.
	ErrInvalidArgument error = &argError{}

	// errTooManyHandles is returned when the handle table is full; the driver's new value
	// is released again.
	errTooManyHandles = fmt.Errorf("cu: more than %d live allocation handles: %w", maxSlots, ERROR_OUT_OF_MEMORY)
)

type argError struct{ msg string }

func (e *argError) Error() string {
	if e.msg == "" {
		return "cu: invalid argument"
	}
	return e.msg
}

func (e *argError) Is(target error) bool {
	return target == ErrInvalidArgument || target == ERROR_INVALID_VALUE
}

// As lets ResultOf and errors.As(err, &res) see ERROR_INVALID_VALUE.
func (e *argError) As(target any) bool {
	if r, ok := target.(*Result); ok {
		*r = ERROR_INVALID_VALUE
		return true
	}
	return false
}

func invalidArg(msg string) error { return &argError{msg: msg} }

// Explain says what was wrong with the argument, for messages that show the driver's
// result rather than this error's text (see vmm.Explainer).
func (e *argError) Explain() string { return strings.TrimPrefix(e.msg, "cu: ") }
