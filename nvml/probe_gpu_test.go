//go:build gpu

package nvml

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/stretchr/testify/require"
)

// The real snapshot, printed for the record, and checked against what the CUDA driver
// says about the same GPUs.
func TestGPUProbe(t *testing.T) {
	if err := cu.Init(); err != nil {
		if errors.Is(err, loader.ErrNoDriver) {
			t.Skipf("no CUDA driver: %v", err)
		}
		t.Fatalf("cuInit: %v", err)
	}
	n := Probe()
	require.Empty(t, n.Unavailable, "NVML comes with the driver")
	t.Logf("library             %s", n.Library)
	t.Logf("driver version      %v", n.DriverVersion)
	t.Logf("cuda driver version %v", n.CUDADriverVersion)
	t.Logf("gpus                %v", n.GPUCount)
	for _, g := range n.GPUs {
		t.Logf("gpu %d: %v, %v, %v", g.Index, g.Name, g.UUID, g.PCIBusID)
		if f := g.Fabric; f.Known() {
			v := f.Value
			t.Logf("  fabric  state %v, status %v, clique %d, cluster %s, health %v (problems %v), summary %v, struct v%d",
				v.State, v.Status, v.CliqueID, v.ClusterUUID, v.Health, v.Health.Value.Problems(), v.Summary, v.Version)
		} else {
			t.Logf("  fabric  %v", f)
		}
		if l := g.NvLinks; l.Known() {
			t.Logf("  nvlinks %d of %d active, to an NVSwitch: %v", l.Value.Active, l.Value.Total, l.Value.ToNVSwitch)
		} else {
			t.Logf("  nvlinks %v", l)
		}
	}
	for _, p := range Symbols() {
		t.Logf("symbol %-40s %v", p.Symbol().Name, p.Find())
	}

	require.True(t, n.DriverVersion.Known(), n.DriverVersion.Why)
	require.True(t, n.GPUCount.Known(), n.GPUCount.Why)
	require.Len(t, n.GPUs, n.GPUCount.Value)
	if v, err := cu.DriverVersion(); err == nil && n.CUDADriverVersion.Known() {
		require.Equal(t, v, n.CUDADriverVersion.Value, "nvmlSystemGetCudaDriverVersion_v2 asks cuDriverGetVersion")
	}
	nvmlBusIDs := map[string]bool{}
	for _, g := range n.GPUs {
		require.True(t, g.Name.Known(), g.Name.Why)
		require.True(t, g.UUID.Known(), g.UUID.Why)
		require.True(t, strings.HasPrefix(g.UUID.Value, "GPU-"), g.UUID.Value)
		require.True(t, g.PCIBusID.Known(), g.PCIBusID.Why)
		nvmlBusIDs[busID(t, g.PCIBusID.Value)] = true
	}
	// Every CUDA device is on one of NVML's GPUs (a MIG instance is on its GPU's bus id).
	count, err := cu.DeviceCount()
	require.NoError(t, err)
	for i := range count {
		d, err := cu.DeviceGet(i)
		require.NoError(t, err)
		id, err := d.PCIBusID()
		require.NoError(t, err)
		require.True(t, nvmlBusIDs[busID(t, id)], "CUDA device %d (%s) among NVML's GPUs %v", i, id, nvmlBusIDs)
	}
}

// busID normalizes a PCI bus id: NVML writes the domain with eight digits, CUDA with four,
// and the case of the hex digits may differ.
func busID(t *testing.T, s string) string {
	dom, rest, ok := strings.Cut(strings.ToLower(s), ":")
	require.True(t, ok, s)
	d, err := strconv.ParseUint(dom, 16, 32)
	require.NoError(t, err, s)
	return fmt.Sprintf("%04x:%s", d, rest)
}

func TestGPUBusIDNormalization(t *testing.T) {
	require.Equal(t, busID(t, "00000000:2A:00.0"), busID(t, "0000:2a:00.0"))
	require.NotEqual(t, busID(t, "00000001:2A:00.0"), busID(t, "0000:2a:00.0"))
}
