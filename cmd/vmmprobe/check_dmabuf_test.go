package main

import (
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dmaBufResult runs the checks on a preset, with fault armed by arm, and returns the dma-buf
// check of device 0.
func dmaBufResult(t *testing.T, preset string, arm func(*testing.T, interface {
	FailNth(sim.Op, int, cu.Result) error
})) checkResult {
	t.Helper()
	s := newSim(t, preset)
	doc := gatherSim(t, s, cmdCheck)
	if arm != nil {
		arm(t, s)
	}
	runChecks(s, doc, checkOptions{childSpec: "sim:" + preset})
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	for _, c := range doc.Checks {
		if c.Check == "dma-buf" && c.Device != nil && *c.Device == 0 {
			return c
		}
	}
	t.Fatalf("no dma-buf check on %s", preset)
	return checkResult{}
}

func TestDmaBufCheck(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		r := dmaBufResult(t, "h100", nil)
		assert.Equal(t, statusUnsupported, r.Status)
		assert.Equal(t, "dma-buf descriptors are Linux only", r.Detail)
		return
	}
	r := dmaBufResult(t, "h100", nil)
	assert.Equal(t, statusOK, r.Status)
	assert.Equal(t, "exported 2 GPUDirect RDMA capable chunks of 2MiB mapped one after another as one dma-buf of 4MiB (its size, by lseek, 4MiB; the simulator's stand-in, a memfd); closed", r.Detail)

	r = dmaBufResult(t, "workstation", nil)
	assert.Equal(t, statusUnsupported, r.Status)
	assert.Contains(t, r.Detail, "DMA_BUF_SUPPORTED is 0")
	assert.Contains(t, r.Remedy, "nvidia_peermem")

	// The device says it can and the driver refuses: failed, with the driver's result.
	r = dmaBufResult(t, "h100", func(t *testing.T, s interface {
		FailNth(sim.Op, int, cu.Result) error
	}) {
		require.NoError(t, s.FailNth(sim.OpExportDmaBuf, 1, cu.ERROR_INVALID_VALUE))
	})
	assert.Equal(t, statusFailed, r.Status)
	assert.Equal(t, "export failed", r.Detail)
	assert.Equal(t, "CUDA_ERROR_INVALID_VALUE", r.Result)
	assert.Contains(t, r.Remedy, "the export of a range of two chunks failed")
}
