package checkpoint_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fake is the driver's state machine as recorded on an H200 (driver 580, 2026-11-28:
// TestGPUCheckpointRestore's transcript): lock from running, checkpoint from locked,
// restore from checkpointed (to locked), unlock from locked; each of unlock and checkpoint
// while running, lock and restore while locked, unlock and checkpoint while checkpointed
// returned CUDA_ERROR_ILLEGAL_STATE, and the state of a process that does not exist (or no
// longer) CUDA_ERROR_OPERATING_SYSTEM. calls records what reached it.
type fake struct {
	state   cu.ProcessState
	calls   []string
	timeout bool // the next lock times out (CUDA_ERROR_NOT_READY), leaving it running
	// lieAfter names a call after which State reports failed, whatever the state.
	lieAfter string
	// restoreErrs are what the next restores return, in order, leaving the process
	// checkpointed (recorded: OUT_OF_MEMORY with the device full, then OPERATING_SYSTEM
	// with the memory free again; INVALID_VALUE for pairs missing a GPU it saw).
	restoreErrs []cu.Result
}

func (f *fake) State(pid int) (cu.ProcessState, error) {
	if pid > 1<<22 { // above Linux's largest pid: no such process
		return 0, &cu.Error{Op: "cuCheckpointProcessGetState", Err: cu.ERROR_OPERATING_SYSTEM}
	}
	if n := len(f.calls); n > 0 && f.calls[n-1] == f.lieAfter {
		return cu.PROCESS_STATE_FAILED, nil
	}
	return f.state, nil
}

func (f *fake) move(call string, from, to cu.ProcessState) error {
	f.calls = append(f.calls, call)
	if f.state != from {
		return &cu.Error{Op: call, Err: cu.ERROR_ILLEGAL_STATE}
	}
	f.state = to
	return nil
}

func (f *fake) Lock(_ int, _ time.Duration) error {
	if f.timeout {
		f.calls = append(f.calls, "lock")
		return &cu.Error{Op: "cuCheckpointProcessLock", Err: cu.ERROR_NOT_READY}
	}
	return f.move("lock", cu.PROCESS_STATE_RUNNING, cu.PROCESS_STATE_LOCKED)
}
func (f *fake) Checkpoint(int) error {
	return f.move("checkpoint", cu.PROCESS_STATE_LOCKED, cu.PROCESS_STATE_CHECKPOINTED)
}
func (f *fake) Restore(int, []cu.GPUPair) error {
	if len(f.restoreErrs) > 0 && f.state == cu.PROCESS_STATE_CHECKPOINTED {
		f.calls = append(f.calls, "restore")
		r := f.restoreErrs[0]
		f.restoreErrs = f.restoreErrs[1:]
		return &cu.Error{Op: "cuCheckpointProcessRestore", Err: r}
	}
	return f.move("restore", cu.PROCESS_STATE_CHECKPOINTED, cu.PROCESS_STATE_LOCKED)
}
func (f *fake) Unlock(int) error {
	return f.move("unlock", cu.PROCESS_STATE_LOCKED, cu.PROCESS_STATE_RUNNING)
}

// TestNoSuchProcess: the driver's answer for a process that is not there comes back with
// the process named, its state unknown.
func TestNoSuchProcess(t *testing.T) {
	p, err := newProc(&fake{}, 1<<23)
	require.NoError(t, err)
	err = p.Lock(time.Second)
	require.ErrorIs(t, err, cu.ERROR_OPERATING_SYSTEM)
	assert.Equal(t, "checkpoint: lock pid 8388608: cu: cuCheckpointProcessGetState: CUDA_ERROR_OPERATING_SYSTEM: an OS call failed", err.Error())
}

// A nil or zero Process fails every call with ErrInvalid, and a pid the driver's int cannot
// hold (1234 + 2^32 would be 1234 there) is refused.
func TestNilAndZeroProcess(t *testing.T) {
	for name, p := range map[string]*checkpoint.Process{"nil": nil, "zero": {}} {
		_, err := p.State()
		require.ErrorIs(t, err, vmm.ErrInvalid, name)
		for op, err := range map[string]error{"lock": p.Lock(time.Second), "checkpoint": p.Checkpoint(), "restore": p.Restore(), "unlock": p.Unlock()} {
			require.ErrorIs(t, err, vmm.ErrInvalid, "%s %s", name, op)
			require.ErrorContains(t, err, "checkpoint: "+op+" pid 0", "%s %s", name, op)
		}
	}
	require.Zero(t, (*checkpoint.Process)(nil).Pid())
	require.Equal(t, "checkpoint: lock pid 1", (&checkpoint.Error{Op: "lock", Pid: 1}).Error(), "an Error without a cause")
	for _, pid := range []int{0, -1, 1234 + 1<<32} {
		_, err := newProc(&fake{}, pid)
		require.ErrorIs(t, err, vmm.ErrInvalid, "pid %d", pid)
	}
}

func TestCycle(t *testing.T) {
	f := &fake{}
	p, err := newProc(f, 4242)
	require.NoError(t, err)
	require.NoError(t, p.Lock(time.Second))
	require.NoError(t, p.Checkpoint())
	require.NoError(t, p.Restore())
	require.NoError(t, p.Unlock())
	assert.Equal(t, []string{"lock", "checkpoint", "restore", "unlock"}, f.calls)
	s, err := p.State()
	require.NoError(t, err)
	assert.Equal(t, cu.PROCESS_STATE_RUNNING, s)
}

// TestWrongStateNeverReachesTheDriver: each call from a state that does not allow it fails
// with ErrState, naming the process and its state, and the driver is not asked.
func TestWrongStateNeverReachesTheDriver(t *testing.T) {
	for _, tc := range []struct {
		state cu.ProcessState
		call  func(*checkpoint.Process) error
		op    string
	}{
		{cu.PROCESS_STATE_LOCKED, func(p *checkpoint.Process) error { return p.Lock(0) }, "lock"},
		{cu.PROCESS_STATE_RUNNING, (*checkpoint.Process).Checkpoint, "checkpoint"},
		{cu.PROCESS_STATE_LOCKED, func(p *checkpoint.Process) error { return p.Restore() }, "restore"},
		{cu.PROCESS_STATE_CHECKPOINTED, (*checkpoint.Process).Unlock, "unlock"},
		{cu.PROCESS_STATE_FAILED, (*checkpoint.Process).Unlock, "unlock"},
	} {
		f := &fake{state: tc.state}
		p, err := newProc(f, 77)
		require.NoError(t, err)
		err = tc.call(p)
		require.ErrorIs(t, err, checkpoint.ErrState, tc.op)
		var ce *checkpoint.Error
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, 77, ce.Pid)
		assert.Equal(t, tc.state, ce.State)
		assert.Contains(t, err.Error(), "pid 77 ("+tc.state.String()+")")
		assert.Empty(t, f.calls, "%s reached the driver", tc.op)
	}
}

// newProc is checkpoint.New with a /proc where the process is not stopped (the tests'
// pids are made up).
func newProc(d checkpoint.Driver, pid int) (*checkpoint.Process, error) {
	return checkpoint.NewIn(fstest.MapFS{}, d, pid)
}

// TestLockStopped: a stopped process is refused before the driver is called, whose lock
// of a stopped process did not return within 5 minutes with a timeout of 1 s (H200,
// driver 580).
func TestLockStopped(t *testing.T) {
	f := &fake{}
	p, _ := checkpoint.NewIn(node(), f, 200)
	err := p.Lock(time.Second)
	require.ErrorIs(t, err, checkpoint.ErrStopped)
	assert.Contains(t, err.Error(), "checkpoint: lock pid 200: the process is stopped (SIGSTOP, a tracer or a frozen cgroup)")
	assert.Empty(t, f.calls)
}

// TestLockFrozen: a process of a frozen cgroup is as stopped as SIGSTOP leaves it, its
// state S or D: cgroup v2 (cgroup.events, also under unified/ on a hybrid host), v1 (the
// freezer's state), a thread's own cgroup; a cgroup thawed, or outside this cgroup
// namespace, is not.
func TestLockFrozen(t *testing.T) {
	fsys := node()
	add := func(pid int, cgroup string) {
		p := fmt.Sprintf("proc/%d/", pid)
		fsys[p+"stat"] = &fstest.MapFile{Data: []byte(fmt.Sprintf("%d (server) S 1 %d ...", pid, pid))}
		fsys[p+"maps"] = &fstest.MapFile{Data: []byte("x /usr/lib64/libcuda.so.1\n")}
		fsys[p+"cgroup"] = &fstest.MapFile{Data: []byte(cgroup)}
	}
	add(810, "0::/kubepods/pod1/c1\n")
	fsys["sys/fs/cgroup/kubepods/pod1/c1/cgroup.events"] = &fstest.MapFile{Data: []byte("populated 1\nfrozen 1\n")}
	add(820, "12:pids:/docker/a\n7:freezer:/docker/a\n0::/docker/a\n")
	fsys["sys/fs/cgroup/freezer/docker/a/freezer.state"] = &fstest.MapFile{Data: []byte("FROZEN\n")}
	add(830, "0::/kubepods/pod2\n")
	fsys["sys/fs/cgroup/kubepods/pod2/cgroup.events"] = &fstest.MapFile{Data: []byte("populated 1\nfrozen 0\n")}
	add(840, "0::/../../elsewhere\n")
	fsys["sys/fs/cgroup/elsewhere/cgroup.events"] = &fstest.MapFile{Data: []byte("frozen 1\n")}
	// A hybrid host: v1's controllers, cgroup2 at /sys/fs/cgroup/unified.
	add(850, "12:pids:/u\n0::/u\n")
	fsys["sys/fs/cgroup/unified/u/cgroup.events"] = &fstest.MapFile{Data: []byte("frozen 1\n")}
	// A thread of its own threaded cgroup, frozen; the leader's is not.
	add(860, "0::/t\n")
	fsys["proc/860/task/860/stat"] = &fstest.MapFile{Data: []byte("860 (server) S 1 860 ...")}
	fsys["proc/860/task/860/cgroup"] = &fstest.MapFile{Data: []byte("0::/t\n")}
	fsys["proc/860/task/861/stat"] = &fstest.MapFile{Data: []byte("861 (worker) S 1 860 ...")}
	fsys["proc/860/task/861/cgroup"] = &fstest.MapFile{Data: []byte("0::/t/worker\n")}
	fsys["sys/fs/cgroup/t/worker/cgroup.events"] = &fstest.MapFile{Data: []byte("frozen 1\n")}
	for pid, frozen := range map[int]bool{810: true, 820: true, 830: false, 840: false, 850: true, 860: true} {
		f := &fake{}
		p, err := checkpoint.NewIn(fsys, f, pid)
		require.NoError(t, err)
		err = p.Lock(time.Second)
		if frozen {
			require.ErrorIs(t, err, checkpoint.ErrStopped, "pid %d", pid)
			assert.Empty(t, f.calls, "pid %d", pid)
			require.NotEmpty(t, checkpoint.Preflight(fsys, pid).Hazards, "pid %d", pid)
		} else {
			require.NotErrorIs(t, err, checkpoint.ErrStopped, "pid %d", pid)
		}
	}
}

// TestLockTimeout: the driver's NOT_READY comes back as the error, the process running.
func TestLockTimeout(t *testing.T) {
	f := &fake{timeout: true}
	p, _ := newProc(f, 9)
	err := p.Lock(10 * time.Millisecond)
	require.ErrorIs(t, err, cu.ERROR_NOT_READY)
	s, _ := p.State()
	assert.Equal(t, cu.PROCESS_STATE_RUNNING, s)
}

// TestStateAfterIsChecked: a driver that reports another state after a call that
// succeeded is an error.
func TestStateAfterIsChecked(t *testing.T) {
	f := &fake{lieAfter: "restore"}
	p, _ := newProc(f, 9)
	require.NoError(t, p.Lock(0))
	require.NoError(t, p.Checkpoint())
	err := p.Restore()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "checkpoint: restore pid 9 (checkpointed): the driver reports failed after it, not locked")
}

// TestSimSaysItNeedsTheDriver: on the simulator every call says checkpoint needs the real
// driver.
func TestSimSaysItNeedsTheDriver(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	p, err := newProc(checkpoint.For(s), 123)
	require.NoError(t, err)
	err = p.Lock(time.Second)
	require.ErrorIs(t, err, loader.ErrNotSupported)
	assert.Contains(t, err.Error(), "checkpoint and restore need the real CUDA driver")
	assert.Contains(t, err.Error(), "backend sim")
	_, err = checkpoint.New(nil, 1)
	require.Error(t, err)
	_, err = checkpoint.New(checkpoint.CUDA{}, 0)
	require.Error(t, err)
}

func TestCompletePairs(t *testing.T) {
	g := func(b byte) cu.UUID { return cu.UUID{b} }
	pair := func(o, n byte) cu.GPUPair { return cu.GPUPair{Old: g(o), New: g(n)} }
	host := []cu.UUID{g(0), g(1), g(2), g(3)}
	for _, tc := range []struct {
		pairs, want []cu.GPUPair
	}{
		{nil, []cu.GPUPair{pair(0, 0), pair(1, 1), pair(2, 2), pair(3, 3)}},
		{[]cu.GPUPair{pair(0, 1)}, []cu.GPUPair{pair(0, 1), pair(2, 2), pair(3, 3), pair(1, 0)}},
		// GPU 1 is not named and nothing moves onto it: it stays.
		{[]cu.GPUPair{pair(0, 3), pair(3, 2)}, []cu.GPUPair{pair(0, 3), pair(3, 2), pair(1, 1), pair(2, 0)}},
	} {
		got, err := checkpoint.CompletePairs(tc.pairs, host)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%v", tc.pairs)
	}
	for _, bad := range [][]cu.GPUPair{{pair(0, 9)}, {pair(9, 0)}, {pair(0, 1), pair(2, 1)}, {pair(0, 1), pair(0, 2)}} {
		_, err := checkpoint.CompletePairs(bad, host)
		require.ErrorIs(t, err, vmm.ErrInvalid, "%v", bad)
	}
	_, err := checkpoint.CompletePairs([]cu.GPUPair{pair(1, 0)}, []cu.UUID{g(0), g(0), g(1)})
	require.ErrorIs(t, err, vmm.ErrInvalid, "a host listing a GPU twice")
}

// TestRestoreRefused: a restore the driver refuses (out of memory, then an OS error on the
// retry, as recorded) comes back as the driver's error with the state it was in, and the
// process stays checkpointed.
func TestRestoreRefused(t *testing.T) {
	f := &fake{state: cu.PROCESS_STATE_CHECKPOINTED, restoreErrs: []cu.Result{cu.ERROR_OUT_OF_MEMORY, cu.ERROR_OPERATING_SYSTEM}}
	p, _ := newProc(f, 9)
	err := p.Restore()
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	assert.Contains(t, err.Error(), "checkpoint: restore pid 9 (checkpointed)")
	require.ErrorIs(t, p.Restore(), cu.ERROR_OPERATING_SYSTEM)
	s, _ := p.State()
	assert.Equal(t, cu.PROCESS_STATE_CHECKPOINTED, s)
}
