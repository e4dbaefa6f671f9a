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
var deviations = map[string]vmmtest.Deviation{
	"sweep/reserve-64TiB": {
		Got: "CUDA_SUCCESS: align2M=true align4M=true align1G=false hinthit=false",
		Why: "the driver placed 64 TiB 1 GiB-aligned, high in the address space; sim aligns to at most Config.PlacementAlign (32 MiB)",
	},
	"edges/reserve-hint-inside-freed-Z": {
		Got: "CUDA_SUCCESS: hinthit=true",
		Why: "the driver did not honour a hint into a range reserved and freed before in the same process; sim takes any free hinted range (placement/hint-far-*)",
	},
}

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
		vmmtest.Run(t, newSim(sim.PresetMNNVL), vmmtest.Capabilities{Multicast: true, Fabric: true, Dangerous: true, Deviations: deviations})
	})
}
