package sim_test

import (
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
)

func TestMain(m *testing.M) {
	// The cross-process tests re-execute this binary as the importing child.
	vmmtest.RunChildIfRequested(func() (vmm.Backend, error) { return sim.New(sim.PresetMNNVL()) })
	runShareChildIfRequested()
	runFabricChildIfRequested()
	os.Exit(m.Run())
}
