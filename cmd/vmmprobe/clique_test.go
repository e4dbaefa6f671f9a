package main

import (
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCliqueGolden: GPU feature discovery's rule (k8s-device-plugin internal/lm/imex.go,
// go-nvlib IsFabricAttached, GetFabricIDs), case by case; "" is "no label". The value of
// GFD's README (7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1) is the first case.
func TestCliqueGolden(t *testing.T) {
	const (
		readme = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31"
		other  = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	)
	on := func(i int, st nvml.FabricState, status nvml.Return, cluster string, clique uint32) nvml.GPU {
		return nvml.GPU{Index: i, Fabric: nvml.Known(nvml.FabricInfo{State: st, Status: status, ClusterUUID: cluster, CliqueID: clique})}
	}
	done := func(i int, cluster string, clique uint32) nvml.GPU {
		return on(i, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, cluster, clique)
	}
	failing := func(i int, r nvml.Return) nvml.GPU {
		return nvml.GPU{Index: i, Fabric: nvml.Unknown[nvml.FabricInfo](&nvml.Error{Op: "nvmlDeviceGetGpuFabricInfoV", Err: r})}
	}
	for _, tc := range []struct {
		name   string
		gpus   []nvml.GPU
		want   string
		unique bool
	}{
		{"GFD's README", []nvml.GPU{done(0, readme, 1), done(1, readme, 1)}, readme + ".1", true},
		{"one GPU", []nvml.GPU{done(0, readme, 7)}, readme + ".7", true},
		{"clique 0 is a value", []nvml.GPU{done(0, readme, 0)}, readme + ".0", true},
		{"largest clique id", []nvml.GPU{done(0, readme, 4294967295)}, readme + ".4294967295", true},
		{"shared clique id 32766", []nvml.GPU{done(0, readme, 32766), done(1, readme, 32766)}, readme + ".32766", false},
		{"no GPU", nil, "", false},
		{"not on a fabric (H200 PCIe, NVML NOT_SUPPORTED)", []nvml.GPU{failing(0, nvml.ERROR_NOT_SUPPORTED)}, "", false},
		{"NVML without the call", []nvml.GPU{failing(0, nvml.ERROR_FUNCTION_NOT_FOUND)}, "", false},
		{"an NVML error stops GFD", []nvml.GPU{done(0, readme, 1), failing(1, nvml.ERROR_UNKNOWN)}, "", false},
		{"NVSwitch host: zero cluster", []nvml.GPU{done(0, zeroCluster, 0), done(1, zeroCluster, 0)}, "", false},
		{"registration not started", []nvml.GPU{on(0, nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.SUCCESS, readme, 1)}, "", false},
		{"registration in progress", []nvml.GPU{on(0, nvml.GPU_FABRIC_STATE_IN_PROGRESS, nvml.SUCCESS, readme, 1)}, "", false},
		{"registration failed", []nvml.GPU{on(0, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.ERROR_UNKNOWN, readme, 1)}, "", false},
		{"GPUs not attached are skipped", []nvml.GPU{
			on(0, nvml.GPU_FABRIC_STATE_IN_PROGRESS, nvml.SUCCESS, other, 2), done(1, readme, 3),
			failing(2, nvml.ERROR_NOT_SUPPORTED), on(3, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.ERROR_UNKNOWN, other, 9),
		}, readme + ".3", true},
		{"two clusters", []nvml.GPU{done(0, readme, 1), done(1, other, 1)}, "", false},
		{"two cliques", []nvml.GPU{done(0, readme, 1), done(1, readme, 2)}, "", false},
		{"two clusters and two cliques", []nvml.GPU{done(0, readme, 1), done(1, other, 2)}, "", false},
		{"upper-case cluster as a string", []nvml.GPU{done(0, strings.ToUpper(readme), 1)}, readme + ".1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := cliqueOf(nvml.Node{GPUs: tc.gpus})
			assert.Equal(t, tc.want, v.Value, v.Why)
			assert.Equal(t, tc.unique, v.Unique)
			assert.NotEmpty(t, v.Why)
		})
	}
	v := cliqueOf(nvml.Node{Unavailable: "NVML unavailable: test"})
	assert.Empty(t, v.Value)
	assert.Contains(t, v.Why, "NVML is unavailable")
}

// TestCliqueLabels: the presets' labels, and GFD's label only when asked for.
func TestCliqueLabels(t *testing.T) {
	const mnnvl = "4d4e4e56-4c37-3200-8000-000000000001.1"
	for preset, want := range map[string]string{"mnnvl": mnnvl, "hgx8": "", "h200": "", "oldgpu": ""} {
		r := runWith(t, backend.Opener{}, "--backend=sim", "--preset", preset, "-o", "labels")
		require.Equal(t, exitOK, r.code, r.stderr)
		if want == "" {
			assert.NotContains(t, r.stdout, "clique", preset)
		} else {
			assert.Contains(t, r.stdout, "\ncuvmm.io/gpu.clique="+want+"\n", preset)
		}
		assert.NotContains(t, r.stdout, gfdCliqueLabel, preset)
		g := runWith(t, backend.Opener{}, "--backend=sim", "--preset", preset, "-o", "labels", "--label-nvidia-clique")
		require.Equal(t, exitOK, g.code, g.stderr)
		if want == "" {
			assert.NotContains(t, g.stdout, gfdCliqueLabel, preset)
		} else {
			assert.True(t, strings.HasSuffix(g.stdout, "\n"+gfdCliqueLabel+"="+want+"\n"), "%s: %s", preset, g.stdout)
		}
	}
	r := runWith(t, backend.Opener{}, "--backend=sim", "--label-nvidia-clique")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--label-nvidia-clique applies to -o labels")
}
