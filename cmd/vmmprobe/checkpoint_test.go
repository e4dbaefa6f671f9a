package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckpointCheck(t *testing.T) {
	r := runWith(t, noDriver, "checkpoint-check", "500")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `500 "server", state S, CUDA yes, GPUs 0, nvidiactl fds 1, dma-buf fds 0`)
	assert.Contains(t, r.stdout, "ok: no hazard found")

	r = runWith(t, noDriver, "checkpoint-check", "600", "-o", "json")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	rep := checkpointReportOf(t, r.stdout)
	require.Len(t, rep.Process.Hazards, 1)
	assert.Contains(t, rep.Process.Hazards[0].What, "dma-buf")

	// A process's name cannot write lines of the report.
	r = runWith(t, noDriver, "checkpoint-check", "800")
	assert.Contains(t, r.stdout, `800 "x\nok: no hazard \x1b[2J", state S`)
	assert.NotContains(t, r.stdout, "\nok: no hazard")

	r = runWith(t, noDriver, "checkpoint-check", "700")
	require.Equal(t, exitCheckFailed, r.code)
	assert.Contains(t, r.stdout, "no process 700")
}

func TestCheckpointOnSim(t *testing.T) {
	r := runWith(t, backend.Opener{}, "checkpoint", "500", "--backend=sim", "--timeout", "2s")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	assert.Contains(t, r.stdout, "checkpoint and restore need the real CUDA driver")
	r = runWith(t, backend.Opener{}, "checkpoint", "600", "--backend=sim")
	require.Equal(t, exitCheckFailed, r.code)
	assert.Contains(t, r.stdout, "refused: checkpoint-check finds 1 hazard(s)")
	r = runWith(t, backend.Opener{}, "restore", "500", "--backend=sim")
	require.Equal(t, exitCheckFailed, r.code)
	assert.Contains(t, r.stdout, "need the real CUDA driver")
}

func TestCheckpointUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"checkpoint"}, "checkpoint needs the process id"},
		{[]string{"checkpoint", "abc"}, `checkpoint "abc": not a process id`},
		{[]string{"restore", "0"}, `restore "0": not a process id`},
		{[]string{"restore", "4294967796", "--force"}, `restore "4294967796": not a process id`}, // 500 in the driver's int
		{[]string{"checkpoint", "1", "--timeout", "0s"}, "--timeout 0s: more than 0s"},
		{[]string{"checkpoint", "1", "--timeout", "-1s"}, "--timeout -1s: more than 0s"},
		{[]string{"checkpoint", "1", "--timeout", "2000h"}, "at most 1193h"},
		{[]string{"checkpoint-check", "1", "2"}, `unexpected argument "2"`},
		{[]string{"restore", "1", "--timeout", "1s"}, "--timeout applies to pair and checkpoint"},
		{[]string{"checkpoint", "1", "-o", "labels"}, `-o "labels": checkpoint writes table, json`},
		{[]string{"checkpoint", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632"}, "--to-gpu applies to restore"},
		{[]string{"restore", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632"}, "is not OLD=NEW (the driver needs the GPU the process had"},
		{[]string{"checkpoint", "1", "--force"}, "--force applies to restore"},
		{[]string{"restore", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632=GPU-x"}, `"GPU-x" is not a GPU UUID`},
		{[]string{"restore", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632=GPU-a1b2c3d4-0000-1111-2222-333344445555,GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632=GPU-a1b2c3d4-0000-1111-2222-333344445555"}, "named twice"},
	} {
		r := runWith(t, noDriver, tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}

// TestRestoreToGPU: --to-gpu's pairs reach the driver as given (on sim, which has no
// checkpoint, the report still names them).
func TestRestoreToGPU(t *testing.T) {
	const old, new = "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632", "GPU-a1b2c3d4-0000-1111-2222-333344445555"
	r := runWith(t, backend.Opener{}, "restore", "500", "--backend=sim", "--to-gpu", old+"="+new, "-o", "json")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	rep := checkpointReportOf(t, r.stdout)
	assert.Equal(t, []string{old + "=" + new}, rep.Pairs)
	assert.Contains(t, rep.Error, "need the real CUDA driver")

	r = runWith(t, backend.Opener{}, "restore", "500", "--backend=sim", "--to-gpu", new+"="+old)
	assert.Contains(t, r.stdout, "onto")
	assert.Contains(t, r.stdout, new+"="+old)
}

// TestMemoryHazard: the process's memory must fit on each GPU a pair moves memory onto,
// or without pairs on the GPU with the most free; an unknown resident size is a hazard too.
func TestMemoryHazard(t *testing.T) {
	g := func(b byte) cu.UUID { return cu.UUID{b} }
	devs := []device{{g(0), 1 << 30}, {g(1), 40 << 30}, {g(2), 15 << 30}}
	proc := checkpoint.Report{Resident: 20 << 30}
	assert.Nil(t, memoryHazard([]cu.GPUPair{{Old: g(0), New: g(1)}}, proc, devs), "device 1 has 40 GiB free")
	h := memoryHazard([]cu.GPUPair{{Old: g(1), New: g(0)}}, proc, devs)
	require.NotNil(t, h, "device 0 has 1 GiB free")
	assert.Contains(t, h.What, "the process holds 20GiB of anonymous host memory, its checkpoint among it, and "+g(0).String()+" has 1GiB free")
	h = memoryHazard([]cu.GPUPair{{Old: g(0), New: g(1)}, {Old: g(1), New: g(2)}}, proc, devs)
	require.NotNil(t, h, "each target must hold it: 15 GiB on device 2 is short, though 55 GiB in all is not")
	assert.Contains(t, h.What, g(2).String()+" has 15GiB free")
	assert.Nil(t, memoryHazard(nil, proc, devs), "without pairs: the GPU with the most")
	h = memoryHazard(nil, proc, []device{{g(0), 8 << 30}, {g(1), 12 << 30}})
	require.NotNil(t, h, "20 GiB fits in neither GPU, though in both together")
	assert.Contains(t, h.What, "the most free is 12GiB")
	assert.Contains(t, h.Remedy, "--force")
	h = memoryHazard(nil, checkpoint.Report{}, devs)
	require.NotNil(t, h, "a resident size that could not be read")
	assert.Contains(t, h.What, "could not be read")
}

// restoreDriver is the driver's answers to restores as recorded on two H200s: pairs that
// leave out a GPU the process saw are refused (INVALID_VALUE) and leave it checkpointed;
// every GPU paired, it is restored (locked).
type restoreDriver struct {
	saw      int // GPUs the process saw
	state    cu.ProcessState
	restores [][]cu.GPUPair
}

func (d *restoreDriver) State(int) (cu.ProcessState, error) { return d.state, nil }
func (d *restoreDriver) Lock(int, time.Duration) error      { return nil }
func (d *restoreDriver) Checkpoint(int) error               { return nil }
func (d *restoreDriver) Unlock(int) error                   { d.state = cu.PROCESS_STATE_RUNNING; return nil }
func (d *restoreDriver) Restore(_ int, pairs []cu.GPUPair) error {
	d.restores = append(d.restores, pairs)
	if len(pairs) > 0 && len(pairs) < d.saw {
		return &cu.Error{Op: "cuCheckpointProcessRestore", Err: cu.ERROR_INVALID_VALUE}
	}
	d.state = cu.PROCESS_STATE_LOCKED
	return nil
}

// TestRestoreRetriesWithEveryGPUPaired: --to-gpu A=B on a host of three GPUs, refused as
// given, is retried once with C staying where it is and B going to A; the report says so
// and names the pairs used. A GPU short of memory refuses the restore unless --force.
func TestRestoreRetriesWithEveryGPUPaired(t *testing.T) {
	g := func(b byte) cu.UUID { return cu.UUID{b} }
	drv := &restoreDriver{saw: 3, state: cu.PROCESS_STATE_CHECKPOINTED}
	d := testDeps(backend.Opener{})
	d.checkpointer = func(vmm.Backend) checkpoint.Driver { return drv }
	free := uint64(100 << 30)
	d.gpus = func(vmm.Backend) ([]device, error) {
		return []device{{g(0), free}, {g(1), free}, {g(2), free}}, nil
	}
	restore := func(args ...string) outcome {
		var out, errb bytes.Buffer
		code := run(append([]string{"restore", "500", "--backend=sim", "-o", "json"}, args...), &out, &errb, d)
		return outcome{code, out.String(), errb.String()}
	}
	r := restore("--to-gpu", g(0).String()+"="+g(1).String())
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	rep := checkpointReportOf(t, r.stdout)
	assert.Equal(t, []string{g(0).String() + "=" + g(1).String(), g(2).String() + "=" + g(2).String(), g(1).String() + "=" + g(0).String()}, rep.Pairs)
	require.Len(t, drv.restores, 2)
	assert.Len(t, drv.restores[0], 1, "first as given")
	assert.Contains(t, strings.Join(rep.Notes, "\n"), "the driver refused the pairs as given (CUDA_ERROR_INVALID_VALUE)")
	assert.Equal(t, []string{"restore", "restore, every GPU paired", "unlock"}, stepNames(rep))

	drv.state, drv.restores, free = cu.PROCESS_STATE_CHECKPOINTED, nil, 1<<20
	r = restore("--to-gpu", g(0).String()+"="+g(1).String())
	require.Equal(t, exitCheckFailed, r.code)
	rep = checkpointReportOf(t, r.stdout)
	assert.Empty(t, drv.restores, "refused before the driver")
	assert.Contains(t, rep.Diagnosis, "--force")
	r = restore("--to-gpu", g(0).String()+"="+g(1).String(), "--force")
	require.Equal(t, exitOK, r.code, r.stdout)
	assert.NotEmpty(t, checkpointReportOf(t, r.stdout).Process.Warnings)
}

// TestRestoreRefusals (review): a retry whose completion would move memory onto a GPU
// without room is not made; a GPU not of this host, preflight hazards, a process that is
// not checkpointed and a driver that did not initialize each fail before any restore.
func TestRestoreRefusals(t *testing.T) {
	g := func(b byte) cu.UUID { return cu.UUID{b} }
	drv := &restoreDriver{saw: 3, state: cu.PROCESS_STATE_CHECKPOINTED}
	d := testDeps(backend.Opener{})
	d.checkpointer = func(vmm.Backend) checkpoint.Driver { return drv }
	d.gpus = func(vmm.Backend) ([]device, error) {
		return []device{{g(0), 1 << 20}, {g(1), 100 << 30}, {g(2), 100 << 30}}, nil
	}
	run1 := func(args ...string) (outcome, checkpointReport) {
		var out, errb bytes.Buffer
		code := run(append([]string{"restore", "--backend=sim", "-o", "json"}, args...), &out, &errb, d)
		r := outcome{code, out.String(), errb.String()}
		return r, checkpointReportOf(t, r.stdout)
	}
	r, rep := run1("500", "--to-gpu", g(0).String()+"="+g(1).String())
	require.Equal(t, exitCheckFailed, r.code, r.stdout)
	require.Len(t, drv.restores, 1, "the pairs as given only")
	assert.Contains(t, strings.Join(rep.Notes, "\n"), "also moves "+g(1).String()+" to "+g(0).String()+"; not retried")
	assert.Contains(t, strings.Join(rep.Notes, "\n"), "still checkpointed")
	assert.NotEmpty(t, rep.Process.Hazards, "device 0 has 1 MiB free")

	drv.restores = nil
	r, rep = run1("500", "--to-gpu", g(0).String()+"="+g(7).String())
	require.Equal(t, exitCheckFailed, r.code)
	assert.Contains(t, rep.Error, "is not a GPU of this host")
	r, rep = run1("600") // a dma-buf open: a hazard
	require.Equal(t, exitCheckFailed, r.code)
	assert.Contains(t, rep.Diagnosis, "refused: the preflight finds 1 hazard(s)")
	drv.state = cu.PROCESS_STATE_RUNNING
	r, rep = run1("500")
	require.Equal(t, exitCheckFailed, r.code)
	assert.Contains(t, rep.Error, "checkpoint: restore pid 500 (running)")
	assert.Empty(t, drv.restores, "nothing reached the driver's restore")

	// A driver that loaded and did not initialize (the simulated node's Fabric Manager down).
	var out, errb bytes.Buffer
	code := run([]string{"restore", "500", "--backend=sim", "--preset=hgx8-fm-down", "-o", "json"}, &out, &errb, testDeps(backend.Opener{}))
	require.Equal(t, exitNoDriver, code, out.String()+errb.String())
	assert.Contains(t, checkpointReportOf(t, out.String()).Error, "the CUDA driver did not initialize")
}

func stepNames(r checkpointReport) []string {
	var s []string
	for _, st := range r.Steps {
		s = append(s, st.Step)
	}
	return s
}

func checkpointReportOf(t *testing.T, s string) checkpointReport {
	t.Helper()
	var r checkpointReport
	require.NoError(t, json.Unmarshal([]byte(s), &r), s)
	return r
}
