package cu

import (
	"errors"
	"fmt"
	"strconv"
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

// Result is a CUresult: the status every driver call returns. It implements error.
//
// Each code has one name, the C name less "CUDA_" (ERROR_INVALID_VALUE for
// CUDA_ERROR_INVALID_VALUE, and so on), and that constant is the value to test for: a Result
// wrapped by fmt.Errorf("...: %w", err) still matches it with errors.Is.
type Result int32

// Error returns "<C name>: <description>", e.g. "CUDA_ERROR_INVALID_VALUE: one or more of
// the parameters passed to the API call is not within an acceptable range of values".
func (r Result) Error() string {
	d := r.Description()
	// Go error strings start in lower case; leave a leading initialism ("PTX", "CUDA") or
	// identifier alone.
	if len(d) > 1 && 'A' <= d[0] && d[0] <= 'Z' {
		if first, _, _ := strings.Cut(d[1:], " "); strings.ToLower(first) == first {
			d = string(d[0]-'A'+'a') + d[1:]
		}
	}
	return r.Name() + ": " + d
}

// Name returns the C name of r, such as "CUDA_ERROR_INVALID_VALUE", or "CUresult(N)" for a
// code this package does not know (one added by a newer driver).
func (r Result) Name() string {
	if n, ok := resultName(r); ok {
		return n
	}
	return "CUresult(" + strconv.Itoa(int(r)) + ")"
}

// Description returns the one-line description of r from the CUDA header, or "Unknown
// result" for a code this package does not know.
func (r Result) Description() string {
	if d, ok := resultDescription(r); ok {
		return d
	}
	return "Unknown result"
}

// String returns the same as Name.
func (r Result) String() string { return r.Name() }

// resultOf converts the raw return register of a driver call to an error: nil for
// CUDA_SUCCESS, the Result otherwise. CUresult is a C enum, so only the low 32 bits of the
// register are defined; the rest may hold garbage.
func resultOf(r uintptr) error {
	res := Result(int32(uint32(r)))
	if res == SUCCESS {
		return nil
	}
	return res
}
