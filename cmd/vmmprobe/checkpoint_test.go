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
	} {
		r := runWith(t, noDriver, tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
}

func checkpointReportOf(t *testing.T, s string) checkpointReport {
	t.Helper()
	var r checkpointReport
	require.NoError(t, json.Unmarshal([]byte(s), &r), s)
	return r
}
