package sim_test

import (
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
	"github.com/stretchr/testify/require"
)

func newSim(cfg func() sim.Config) vmmtest.NewBackend {
	return func(t testing.TB) vmm.Backend {
		s, err := sim.New(cfg())
		require.NoError(t, err)
		return s
	}
}

// deviations are the recorded cases where sim knowingly returns something else, with why:
// the only place they are listed. vmmtest checks each on every preset (sim must return
// exactly this, and the driver must have returned something else).
var deviations = map[string]vmmtest.Deviation{}

// TestConformance runs the recorded conformance suite on the presets of the recorded machines
// and on those with more capabilities.
func TestConformance(t *testing.T) {
	linux := runtime.GOOS == "linux"
	t.Run("H100", func(t *testing.T) {
		vmmtest.Run(t, newSim(sim.PresetH100), vmmtest.Capabilities{CrossProcess: linux, Dangerous: true, Deviations: deviations})
	})
	t.Run("H200", func(t *testing.T) {
		vmmtest.Run(t, newSim(sim.PresetH200), vmmtest.Capabilities{CrossProcess: linux, Dangerous: true, Deviations: deviations})
	})
	t.Run("HGX8", func(t *testing.T) {
		vmmtest.Run(t, newSim(sim.PresetHGX8), vmmtest.Capabilities{Multicast: true, Dangerous: true, Deviations: deviations})
	})
	t.Run("MNNVL", func(t *testing.T) {
		vmmtest.Run(t, newSim(sim.PresetMNNVL), vmmtest.Capabilities{Multicast: true, Fabric: true, CrossProcess: linux, Dangerous: true, Deviations: deviations})
	})
}
