//go:build gpu

package vmm_test

import (
	"errors"
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
)

func TestMain(m *testing.M) {
	vmmtest.RunChildIfRequested(vmm.CUDA)
	os.Exit(m.Run())
}

func cudaOrSkip(t testing.TB) vmm.Backend {
	t.Helper()
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// imexChannel reports whether this node has an IMEX channel, without which fabric
// handles cannot be created.
func imexChannel() bool {
	_, err := os.Stat("/dev/nvidia-caps-imex-channels/channel0")
	return err == nil
}

func TestGPUConformance(t *testing.T) {
	b := cudaOrSkip(t)
	vmmtest.Run(t, func(testing.TB) vmm.Backend { return b }, vmmtest.Capabilities{
		Fabric:       imexChannel(),
		CrossProcess: true,
		// The faulting cases, and the recorded sequences that copy through mappings
		// without access, can leave the context unusable: run them in a process of their
		// own (CUVMM_VMMTEST_DANGEROUS=1 -test.run 'TestGPUConformance/(walk|faults|dangerous)$').
		Dangerous: os.Getenv("CUVMM_VMMTEST_DANGEROUS") == "1",
		// Multicast is never exercised on the shared GPU machines.
	})
}
