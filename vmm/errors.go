package vmm

import (
	"errors"
	"fmt"
	"slices"
	"strings"

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
	ErrInvalid error = &matching{"invalid argument", []error{cu.ERROR_INVALID_VALUE}}
	// ErrOutOfRange: an offset or size outside the object it names.
	ErrOutOfRange = errors.New("out of range")
	// ErrWouldMove: growing would move the base address of memory that must not move.
	ErrWouldMove = errors.New("growth would move the base address")
	// ErrTooLarge: a size whose rounding or growth overflows 64 bits.
	ErrTooLarge = errors.New("size too large")
	// ErrBroken: a rollback could not restore what it undid (the driver failed twice in a
	// row); the object's memory can no longer be trusted, and only Close still works.
	ErrBroken = errors.New("broken by a failed rollback")
	// ErrAsleep: the memory sleeps (package sleep) with nothing mapped at its addresses,
	// or a region with sleeping chunks was asked to change; Wake first.
	ErrAsleep = errors.New("asleep: the memory is not mapped until Wake")
	// ErrUnsupported: a request asks for something the device says it lacks (GPUDirect RDMA
	// with VMM, compression, host or host-NUMA memory, a shareable handle type), caught before
	// any memory is made. It also matches cu.ERROR_NOT_SUPPORTED.
	ErrUnsupported error = &matching{"not supported by the device", []error{cu.ERROR_NOT_SUPPORTED}}
)

// matching is a condition that also matches the errors in is: the result a driver that
// checked would return, and a broader condition.
type matching struct {
	msg string
	is  []error
}

func (e *matching) Error() string { return e.msg }

func (e *matching) Is(target error) bool { return slices.Contains(e.is, target) }

// Error is the error of a failed operation of cuvmm's typed layer and building blocks: the
// package and operation, its arguments, and why it failed. It unwraps to the cause, so
// errors.Is(err, ErrClosed), errors.Is(err, cu.ERROR_OUT_OF_MEMORY) and cu.ResultOf work.
type Error struct {
	Pkg  string // "vmm", "buffer", "sparse", "peer", "ipc"; empty means "vmm"
	Op   string // "create", "map", "grow", ...
	Args string // e.g. "0x302000000+2MiB"
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
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return causes(err, joined.Unwrap())
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

// causes describes an error made of several (errors.Join: a rollback that failed too,
// releases that failed again) on one line, each part as Cause would; an error that only
// wraps several (fmt.Errorf with two %w) keeps its own text, which says how they relate.
func causes(err error, parts []error) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = p.Error()
	}
	if strings.Join(s, "\n") != err.Error() {
		return strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	for i, p := range parts {
		s[i] = Cause(p)
	}
	return strings.Join(s, "; ")
}

// Explainer is implemented by backend errors that can say why a call was refused beyond
// the driver's result (the simulator does); Error adds it in parentheses.
type Explainer interface {
	// Explain says, in a phrase, why the call was refused ("address not mapped").
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
