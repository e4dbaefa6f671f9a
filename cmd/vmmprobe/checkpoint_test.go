package main

import (
	"encoding/json"
	"testing"

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
		{[]string{"restore", "1", "--to-gpu", "GPU-1"}, `--to-gpu "GPU-1": "GPU-1" is not a GPU UUID`},
		{[]string{"restore", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632=GPU-x"}, `"GPU-x" is not a GPU UUID`},
		{[]string{"restore", "1", "--to-gpu", "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632=GPU-a1b2c3d4-0000-1111-2222-333344445555,GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632=GPU-a1b2c3d4-0000-1111-2222-333344445555"}, "named twice"},
	} {
		r := runWith(t, noDriver, tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}

// TestRestoreToGPU: --to-gpu with one UUID pairs it with the one GPU the process has open
// (its UUID from the driver's /proc files); pairs are taken as given; a process whose GPU
// cannot be told gets no guess.
func TestRestoreToGPU(t *testing.T) {
	const old, new = "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632", "GPU-a1b2c3d4-0000-1111-2222-333344445555"
	r := runWith(t, backend.Opener{}, "restore", "500", "--backend=sim", "--to-gpu", new, "-o", "json")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	rep := checkpointReportOf(t, r.stdout)
	assert.Equal(t, []string{old + "=" + new}, rep.Pairs)
	assert.Contains(t, rep.Error, "need the real CUDA driver", "the pairs reach the driver")

	r = runWith(t, backend.Opener{}, "restore", "500", "--backend=sim", "--to-gpu", new+"="+old)
	assert.Contains(t, r.stdout, "onto")
	assert.Contains(t, r.stdout, new+"="+old)

	r = runWith(t, backend.Opener{}, "restore", "600", "--backend=sim", "--to-gpu", new, "-o", "json")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	rep = checkpointReportOf(t, r.stdout)
	assert.Empty(t, rep.Pairs)
	assert.Contains(t, rep.Error, "cannot be told from here (it has 0 GPU files open); name it: --to-gpu OLD=NEW")
}

func checkpointReportOf(t *testing.T, s string) checkpointReport {
	t.Helper()
	var r checkpointReport
	require.NoError(t, json.Unmarshal([]byte(s), &r), s)
	return r
}
