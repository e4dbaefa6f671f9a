// Package checkpoint drives the CUDA driver's checkpoint and restore of another process
// (cuCheckpointProcess*, CUDA 12.8+): lock it, copy its GPU memory, VMM memory included, into
// host memory and release its GPU resources, bring them back (onto other GPUs of the host
// if asked), and unlock it. Each call is checked against the state the driver reports for
// the process before it, and its error names the process, the call and that state.
//
// The driver is the real one (CUDA) or any Driver, such as a transcript of recorded answers
// in tests; For gives the one a vmm.Backend has, and for the simulator one that says
// checkpoint needs the real driver (it matches loader.ErrNotSupported).
package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
)

// Driver is the driver's checkpoint API for one process id at a time.
type Driver interface {
	State(pid int) (cu.ProcessState, error)
	Lock(pid int, timeout time.Duration) error
	Checkpoint(pid int) error
	Restore(pid int, pairs []cu.GPUPair) error
	Unlock(pid int) error
}

// CUDA is the real driver's API (package cu).
type CUDA struct{}

func (CUDA) State(pid int) (cu.ProcessState, error)    { return cu.CheckpointProcessState(pid) }
func (CUDA) Lock(pid int, timeout time.Duration) error { return cu.CheckpointProcessLock(pid, timeout) }
func (CUDA) Checkpoint(pid int) error                  { return cu.CheckpointProcessCheckpoint(pid) }
func (CUDA) Restore(pid int, pairs []cu.GPUPair) error {
	return cu.CheckpointProcessRestore(pid, pairs)
}
func (CUDA) Unlock(pid int) error { return cu.CheckpointProcessUnlock(pid) }

// unsupported is the driver of a backend without checkpoint.
type unsupported struct{ backend string }

func (u unsupported) err() error {
	return fmt.Errorf("%w: checkpoint and restore need the real CUDA driver (cuCheckpointProcess*, CUDA 12.8+); backend %s has none", loader.ErrNotSupported, u.backend)
}
func (u unsupported) State(int) (cu.ProcessState, error) { return 0, u.err() }
func (u unsupported) Lock(int, time.Duration) error      { return u.err() }
func (u unsupported) Checkpoint(int) error               { return u.err() }
func (u unsupported) Restore(int, []cu.GPUPair) error    { return u.err() }
func (u unsupported) Unlock(int) error                   { return u.err() }

// For is the checkpoint driver of backend b: the real driver's for vmm.CUDA, one whose
// every call fails with loader.ErrNotSupported for any other (the simulator).
func For(b vmm.Backend) Driver {
	if b != nil && b.Name() == "cuda" {
		return CUDA{}
	}
	name := "nil"
	if b != nil {
		name = b.Name()
	}
	return unsupported{backend: name}
}

// ErrStopped is a lock refused because the process is stopped (SIGSTOP, a tracer or a
// frozen cgroup): the driver's lock of a stopped process does not return, whatever its
// timeout (recorded on an H200, driver 580, for SIGSTOP; a frozen cgroup stops it alike).
var ErrStopped = errors.New("the process is stopped")

// ErrState is a call made in a state that does not allow it (locking a process that is
// not running, ...); the error says which state the process was in.
var ErrState = errors.New("not allowed in this state")

// Error is a failed call on a process: which, in which state.
type Error struct {
	Pid   int
	Op    string          // "lock", "checkpoint", "restore", "unlock", "state"
	State cu.ProcessState // the state before the call (as the driver reported it)
	Known bool            // State is known
	Err   error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("checkpoint: %s pid %d", e.Op, e.Pid)
	if e.Known {
		s += " (" + e.State.String() + ")"
	}
	if e.Err == nil {
		return s
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Process is a CUDA process to checkpoint and restore.
type Process struct {
	pid  int
	d    Driver
	root fs.FS // the machine's root, for /proc
}

// New returns process pid through driver d.
func New(d Driver, pid int) (*Process, error) { return NewIn(os.DirFS("/"), d, pid) }

// NewIn is New for a machine whose root file system (whose /proc Lock reads) is root.
func NewIn(root fs.FS, d Driver, pid int) (*Process, error) {
	if d == nil || pid <= 0 || pid > math.MaxInt32 || root == nil {
		return nil, &Error{Pid: pid, Op: "new", Err: fmt.Errorf("%w: a driver, a root file system and a process id from 1 to 2^31-1", vmm.ErrInvalid)}
	}
	return &Process{pid: pid, d: d, root: root}, nil
}

// errNoProcess is the error of every call on a nil or zero Process.
var errNoProcess = fmt.Errorf("%w: a nil or zero Process (make one with New)", vmm.ErrInvalid)

// usable reports whether p was made by New.
func (p *Process) usable() bool { return p != nil && p.d != nil && p.root != nil }

// Pid is the process id (0 for a nil Process).
func (p *Process) Pid() int {
	if p == nil {
		return 0
	}
	return p.pid
}

// State is the process's state as the driver reports it.
func (p *Process) State() (cu.ProcessState, error) {
	if !p.usable() {
		return 0, &Error{Pid: p.Pid(), Op: "state", Err: errNoProcess}
	}
	s, err := p.d.State(p.pid)
	if err != nil {
		return 0, &Error{Pid: p.pid, Op: "state", Err: err}
	}
	return s, nil
}

// step runs one transition: from the state want, through call, to the state after.
func (p *Process) step(op string, want, after cu.ProcessState, call func() error) error {
	if !p.usable() {
		return &Error{Pid: p.Pid(), Op: op, Err: errNoProcess}
	}
	s, err := p.d.State(p.pid)
	if err != nil {
		return &Error{Pid: p.pid, Op: op, Err: err}
	}
	if s != want {
		return &Error{Pid: p.pid, Op: op, State: s, Known: true, Err: fmt.Errorf("%w: it must be %v", ErrState, want)}
	}
	if err := call(); err != nil {
		return &Error{Pid: p.pid, Op: op, State: s, Known: true, Err: err}
	}
	got, err := p.d.State(p.pid)
	if err != nil {
		return &Error{Pid: p.pid, Op: op, State: s, Known: true, Err: fmt.Errorf("the call succeeded, its state after is unknown: %w", err)}
	}
	if got != after {
		return &Error{Pid: p.pid, Op: op, State: s, Known: true, Err: fmt.Errorf("the driver reports %v after it, not %v", got, after)}
	}
	return nil
}

// Lock blocks the process's further CUDA calls, waiting at most timeout for those in
// flight (0: no limit); it must be running, and stays running after a timeout. A stopped
// process is refused with ErrStopped, since the driver would never return.
func (p *Process) Lock(timeout time.Duration) error {
	if !p.usable() {
		return &Error{Pid: p.Pid(), Op: "lock", Err: errNoProcess}
	}
	if stopped(p.root, p.pid) { // (a stop between here and the driver's call still hangs it)
		return &Error{Pid: p.pid, Op: "lock", Err: fmt.Errorf("%w (SIGSTOP, a tracer or a frozen cgroup): the driver's lock would not return, whatever its timeout; continue it first", ErrStopped)}
	}
	return p.step("lock", cu.PROCESS_STATE_RUNNING, cu.PROCESS_STATE_LOCKED, func() error { return p.d.Lock(p.pid, timeout) })
}

// Checkpoint copies the locked process's GPU memory into host memory and releases its GPU
// resources.
func (p *Process) Checkpoint() error {
	return p.step("checkpoint", cu.PROCESS_STATE_LOCKED, cu.PROCESS_STATE_CHECKPOINTED, func() error { return p.d.Checkpoint(p.pid) })
}

// Restore brings the checkpointed process's GPU memory back, onto the GPUs pairs name
// (every GPU it used then) or its own; it is locked afterwards.
func (p *Process) Restore(pairs ...cu.GPUPair) error {
	return p.step("restore", cu.PROCESS_STATE_CHECKPOINTED, cu.PROCESS_STATE_LOCKED, func() error { return p.d.Restore(p.pid, pairs) })
}

// Unlock lets the locked process make CUDA calls again.
func (p *Process) Unlock() error {
	return p.step("unlock", cu.PROCESS_STATE_LOCKED, cu.PROCESS_STATE_RUNNING, func() error { return p.d.Unlock(p.pid) })
}

// CompletePairs completes pairs into a permutation of the host's GPUs: each GPU of host
// that pairs do not move stays where it is when no pair moves a GPU onto it, and the rest
// go, in order, to the GPUs left. The driver needs a pair for every GPU the process had
// (recorded on an H200 with driver 580: a process that saw two GPUs and used one was
// refused, INVALID_VALUE, with only that one paired, and restored with the two swapped),
// and a process sees every GPU of the host unless CUDA_VISIBLE_DEVICES says otherwise.
// Every GPU named must be one of host's, and none twice on either side.
func CompletePairs(pairs []cu.GPUPair, host []cu.UUID) ([]cu.GPUPair, error) {
	on := map[cu.UUID]bool{}
	for _, u := range host {
		if on[u] {
			return nil, fmt.Errorf("%w: the host's GPU %v is listed twice", vmm.ErrInvalid, u)
		}
		on[u] = true
	}
	from, to := map[cu.UUID]bool{}, map[cu.UUID]bool{}
	for _, p := range pairs {
		for _, u := range []cu.UUID{p.Old, p.New} {
			if !on[u] {
				return nil, fmt.Errorf("%w: %v is not a GPU of this host", vmm.ErrInvalid, u)
			}
		}
		if from[p.Old] || to[p.New] {
			return nil, fmt.Errorf("%w: %v or %v is named twice", vmm.ErrInvalid, p.Old, p.New)
		}
		from[p.Old], to[p.New] = true, true
	}
	out := append([]cu.GPUPair(nil), pairs...)
	var moved []cu.UUID // GPUs no pair moves whose place a pair took
	for _, u := range host {
		switch {
		case from[u]:
		case !to[u]:
			out = append(out, cu.GPUPair{Old: u, New: u})
			to[u] = true
		default:
			moved = append(moved, u)
		}
	}
	for _, u := range host {
		if len(moved) == 0 {
			break
		}
		if !to[u] {
			out = append(out, cu.GPUPair{Old: moved[0], New: u})
			moved = moved[1:]
		}
	}
	return out, nil
}
