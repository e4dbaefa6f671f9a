// Package run is what the example programs share: the --backend and --preset flags, opening
// the backend they name, and reporting what was verified.
package run

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/vmm"
)

// Exit codes, as vmmprobe's.
const (
	ExitOK       = 0
	ExitFailed   = 1 // a verification failed
	ExitUsage    = 2
	ExitNoDriver = 3 // --backend=cuda and no driver
)

// Flags are the options every example takes: --backend and --preset, as every command of
// this module takes them (package internal/backend).
type Flags struct {
	backend.Choice
}

// Parse parses args (without the program name) into the common flags plus whatever
// extra registers; defPreset is the sim preset used when none is named.
func Parse(name string, args []string, defPreset string, stderr io.Writer, extra func(*flag.FlagSet)) (Flags, int, bool) {
	var f Flags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.Register(fs, backend.Auto, defPreset)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, ExitOK, false
		}
		return f, ExitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", name, fs.Args())
		return f, ExitUsage, false
	}
	if err := f.Check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return f, ExitUsage, false
	}
	return f, ExitOK, true
}

// Open returns the backend f names. With auto it is the real driver when one loads and
// has a device, else the simulator, with a one-line notice on stderr.
func Open(name string, f Flags, stderr io.Writer) (vmm.Backend, int, error) {
	op, err := backend.Opener{}.Open(f.Choice, backend.FallbackUnusable)
	if err != nil {
		if backend.IsNoDriver(err) {
			return nil, ExitNoDriver, err
		}
		return nil, ExitFailed, err
	}
	if op.FellBack != nil {
		fmt.Fprintf(stderr, "%s: no usable CUDA driver (%v); running on sim preset %q\n", name, oneLine(op.FellBack), f.Preset)
	}
	return op.Backend, ExitOK, nil
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Report prints verified steps and remembers failures.
type Report struct {
	W      io.Writer
	Failed int
}

// OK prints a verified step.
func (r *Report) OK(format string, args ...any) {
	fmt.Fprintf(r.W, "ok    "+format+"\n", args...)
}

// Fail prints a failed verification.
func (r *Report) Fail(format string, args ...any) {
	r.Failed++
	fmt.Fprintf(r.W, "FAIL  "+format+"\n", args...)
}

// Check prints ok or FAIL for err.
func (r *Report) Check(err error, format string, args ...any) bool {
	if err != nil {
		r.Fail(format+": %v", append(args, err)...)
		return false
	}
	r.OK(format, args...)
	return true
}

// Note prints a line that is neither.
func (r *Report) Note(format string, args ...any) {
	fmt.Fprintf(r.W, "      "+format+"\n", args...)
}

// Exit returns the exit code for the report.
func (r *Report) Exit() int {
	if r.Failed > 0 {
		fmt.Fprintf(r.W, "%d verification(s) failed\n", r.Failed)
		return ExitFailed
	}
	return ExitOK
}

// Main runs an example's main function and exits with its code.
func Main(f func(args []string, stdout, stderr io.Writer) int) {
	os.Exit(f(os.Args[1:], os.Stdout, os.Stderr))
}
