package sim_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/nvml"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Sim keeps its own copy of the node: changing the Config afterwards changes nothing.
func TestNodeIsCopied(t *testing.T) {
	cfg := sim.PresetHGX8()
	s, err := sim.New(cfg)
	require.NoError(t, err)
	cfg.Node.NVML.GPUs[0].Name = nvml.Known("changed")
	cfg.Node.FabricManager = false
	got := s.Config().Node
	assert.True(t, got.FabricManager)
	assert.Equal(t, "NVIDIA H200", got.NVML.GPUs[0].Name.Value)
	assert.Len(t, got.NVML.GPUs, 8)
}

// Fabric Manager matters to cuInit only where the NVSwitches are this host's.
func TestNodeInit(t *testing.T) {
	down := sim.PresetHGX8FabricManagerDown()
	_, err := sim.New(down)
	require.ErrorIs(t, err, cu.ERROR_SYSTEM_NOT_READY)
	r, _ := cu.ResultOf(err)
	assert.Equal(t, "CUDA_ERROR_SYSTEM_NOT_READY", r.Name())
	for _, g := range down.Node.NVML.GPUs {
		assert.Equal(t, nvml.GPU_FABRIC_STATE_NOT_STARTED, g.Fabric.Value.State)
	}

	// A multi-node tray has no NVSwitch of its own: no Fabric Manager here, and CUDA works.
	tray := sim.PresetMNNVL()
	require.Zero(t, tray.Node.NVSwitches)
	require.False(t, tray.Node.FabricManager)
	_, err = sim.New(tray)
	require.NoError(t, err)

	// Without a node description, nothing changes.
	bare := sim.PresetHGX8()
	bare.Node = nil
	_, err = sim.New(bare)
	require.NoError(t, err)
}

func TestBrokenPresets(t *testing.T) {
	d := sim.PresetHGX8Degraded().Node.NVML.GPUs[5]
	assert.Equal(t, nvml.HealthTrue, d.Fabric.Value.Health.Value.DegradedBandwidth())
	assert.Equal(t, nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY, d.Fabric.Value.Summary.Value)
	assert.Equal(t, 16, d.NvLinks.Value.Active)
	assert.Empty(t, sim.PresetHGX8Degraded().Node.NVML.GPUs[4].Fabric.Value.Health.Value.Problems())

	assert.False(t, sim.PresetMNNVLNoChannel().IMEX)
	assert.True(t, sim.PresetMNNVLNoChannel().Node.IMEXDaemon)
	assert.Nil(t, sim.PresetH200NoNVML().Node.NVML)
	assert.NotNil(t, sim.PresetH200().Node.NVML, "the preset it derives from is untouched")
}
