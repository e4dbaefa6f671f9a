package sim_test

import (
	"errors"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// New fails as cuInit does on a node whose NVSwitches have no Fabric Manager, and only
// there.
func TestFabricManagerDown(t *testing.T) {
	down := sim.PresetHGX8FabricManagerDown()
	_, err := sim.New(down)
	require.ErrorIs(t, err, cu.ERROR_SYSTEM_NOT_READY)
	r, _ := cu.ResultOf(err)
	assert.Equal(t, "CUDA_ERROR_SYSTEM_NOT_READY", r.Name())
	var se *sim.Error
	require.True(t, errors.As(err, &se))
	assert.Equal(t, "cuInit", se.Op)
	assert.Contains(t, se.Reason, "nvidia-fabricmanager is not running")

	down.FabricManagerDown = false
	_, err = sim.New(down)
	require.NoError(t, err)
	for _, cfg := range []sim.Config{sim.PresetHGX8(), sim.PresetHGX8Degraded(), sim.PresetMNNVL()} {
		assert.False(t, cfg.FabricManagerDown, cfg.Name)
	}
}
