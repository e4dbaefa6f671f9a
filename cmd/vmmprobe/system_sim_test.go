package main

import (
	"testing"

	"github.com/cuvmm/cuvmm/nvml"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every preset describes its node, and a configuration that is no preset none.
func TestEveryPresetHasANode(t *testing.T) {
	for _, name := range sim.Presets() {
		cfg, _ := sim.Preset(name)
		assert.NotNil(t, simNodeOf(cfg), name)
	}
	cfg := sim.PresetH200()
	cfg.Name = "mine"
	assert.Nil(t, simNodeOf(cfg))
}

// Fabric Manager matters to cuInit only where the NVSwitches are this host's: the node
// vmmprobe shows agrees with what sim.New does.
func TestSimNodeFabricManager(t *testing.T) {
	down := simNodeOf(sim.PresetHGX8FabricManagerDown())
	require.Equal(t, 4, down.NVSwitches)
	require.False(t, down.FabricManager)
	for _, g := range down.NVML.GPUs {
		assert.Equal(t, nvml.GPU_FABRIC_STATE_NOT_STARTED, g.Fabric.Value.State)
	}
	assert.True(t, simNodeOf(sim.PresetHGX8()).FabricManager)

	// A multi-node tray has no NVSwitch of its own: no Fabric Manager here, and CUDA works.
	tray := simNodeOf(sim.PresetMNNVL())
	require.Zero(t, tray.NVSwitches)
	require.False(t, tray.FabricManager)
	_, err := sim.New(sim.PresetMNNVL())
	require.NoError(t, err)
}

func TestBrokenPresetNodes(t *testing.T) {
	d := simNodeOf(sim.PresetHGX8Degraded()).NVML.GPUs[5]
	assert.Equal(t, nvml.HealthTrue, d.Fabric.Value.Health.Value.DegradedBandwidth())
	assert.Equal(t, nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY, d.Fabric.Value.Summary.Value)
	assert.Equal(t, 16, d.NvLinks.Value.Active)
	assert.Empty(t, simNodeOf(sim.PresetHGX8Degraded()).NVML.GPUs[4].Fabric.Value.Health.Value.Problems())
	assert.Len(t, simNodeOf(sim.PresetHGX8Degraded()).NVML.GPUs, 8)

	assert.False(t, sim.PresetMNNVLNoChannel().IMEX)
	assert.True(t, simNodeOf(sim.PresetMNNVLNoChannel()).IMEXDaemon)
	assert.Nil(t, simNodeOf(sim.PresetH200NoNVML()).NVML)
	assert.NotNil(t, simNodeOf(sim.PresetH200()).NVML, "the preset it derives from is untouched")
}
