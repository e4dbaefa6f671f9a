package main

import (
	"encoding/json"
	"testing"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckpointCheck(t *testing.T) {
	r := runWith(t, noDriver, "checkpoint-check", "500")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "500 (server), state S, CUDA yes, GPUs 0, nvidiactl fds 1, dma-buf fds 0")
	assert.Contains(t, r.stdout, "ok: no hazard found")

	r = runWith(t, noDriver, "checkpoint-check", "600", "-o", "json")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	rep := checkpointReportOf(t, r.stdout)
	require.Len(t, rep.Process.Hazards, 1)
	assert.Contains(t, rep.Process.Hazards[0].What, "dma-buf")

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
		{[]string{"checkpoint-check", "1", "2"}, `unexpected argument "2"`},
		{[]string{"restore", "1", "--timeout", "1s"}, "--timeout applies to pair and checkpoint"},
		{[]string{"checkpoint", "1", "-o", "labels"}, `-o "labels": checkpoint writes table, json`},
		{[]string{"checkpoint", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632"}, "--to-gpu applies to restore"},
		{[]string{"restore", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632"}, "is not OLD=NEW (the driver needs the GPU the process had"},
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

// TestRestorePlan: pairs are completed with the host's other GPUs, and a restore whose
// GPUs have less free memory than the process holds is refused with the numbers.
func TestRestorePlan(t *testing.T) {
	g := func(b byte) cu.UUID { return cu.UUID{b} }
	devs := []device{{g(0), 1 << 30}, {g(1), 40 << 30}}
	proc := checkpoint.Report{Resident: 20 << 30}
	completed, h, err := restorePlan([]cu.GPUPair{{Old: g(0), New: g(1)}}, proc, devs)
	require.NoError(t, err)
	assert.Nil(t, h, "device 1 has 40 GiB free")
	assert.Equal(t, []cu.GPUPair{{Old: g(0), New: g(1)}, {Old: g(1), New: g(0)}}, completed)

	_, h, err = restorePlan([]cu.GPUPair{{Old: g(1), New: g(0)}}, proc, devs)
	require.NoError(t, err)
	require.NotNil(t, h, "device 0 has 1 GiB free")
	assert.Contains(t, h.What, "have 1GiB free in all, and the process holds 20GiB of host memory")

	_, h, err = restorePlan(nil, proc, devs)
	require.NoError(t, err)
	assert.Nil(t, h, "its own GPUs: all of them count")
	_, _, err = restorePlan([]cu.GPUPair{{Old: g(0), New: g(7)}}, proc, devs)
	require.ErrorContains(t, err, "not a GPU of this host")
}

func checkpointReportOf(t *testing.T, s string) checkpointReport {
	t.Helper()
	var r checkpointReport
	require.NoError(t, json.Unmarshal([]byte(s), &r), s)
	return r
}
