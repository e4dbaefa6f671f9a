package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordedNodes are vmmprobe reports (-o json) of real machines, recorded by
// .ci/vmmprobe-record (docs/vmmprobe-gpu.md), and the sim preset that stands for each: the
// preset's first devices must report what the machine's did. Identity (UUIDs, bus IDs) is
// the machine's own; what a preset claims about capabilities, granularities, memory and
// peer access is checked. An 8-GPU recording, when one exists, joins with hgx8.
var recordedNodes = []struct{ file, preset string }{
	{"report-h200.json", "h200"},
	{"report-2xh200.json", "hgx8"}, // two H200s of an NVSwitch host: hgx8's first two
	{"report-4xh200.json", "hgx8"}, // four H200s of an NVSwitch host (NV18 between every pair): hgx8's first four
}

// nodeFacts is what a report says of a node that a preset must agree with.
type nodeFacts struct {
	Devices []deviceFacts `json:"devices"`
	Peers   []peerFacts   `json:"peers"`
}

type deviceFacts struct {
	Name                 string          `json:"name"`
	ComputeCapability    string          `json:"compute_capability"`
	TotalMemoryBytes     uint64          `json:"total_memory_bytes"`
	VMM                  bool            `json:"vmm"`
	HandleTypes          json.RawMessage `json:"handle_types"`
	Multicast            json.RawMessage `json:"multicast"`
	GenericCompression   bool            `json:"generic_compression"`
	GPUDirectRDMAWithVMM bool            `json:"gpudirect_rdma_with_vmm"`
	HostVMM              bool            `json:"host_vmm"`
	HostNUMAVMM          bool            `json:"host_numa_vmm"`
	Granularity          json.RawMessage `json:"granularity"`
}

type peerFacts struct {
	Device          int  `json:"device"`
	Peer            int  `json:"peer"`
	Access          bool `json:"access"`
	NativeAtomics   bool `json:"native_atomics"`
	PerformanceRank int  `json:"performance_rank"`
}

// TestPresetsMatchRecordedNodes compares each recorded machine with its preset.
func TestPresetsMatchRecordedNodes(t *testing.T) {
	for _, rn := range recordedNodes {
		t.Run(rn.preset+"/"+rn.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "recorded", rn.file))
			require.NoError(t, err)
			var real nodeFacts
			require.NoError(t, json.Unmarshal(raw, &real))
			require.NotEmpty(t, real.Devices)

			r := runWith(t, noDriver, cmdReport, "--backend=sim", "--preset", rn.preset, "-o", formatJSON)
			require.Equal(t, exitOK, r.code, r.stderr)
			var sim nodeFacts
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &sim))
			require.GreaterOrEqual(t, len(sim.Devices), len(real.Devices), "the preset has fewer devices than the machine")

			for i, d := range real.Devices {
				got := sim.Devices[i]
				require.Equal(t, d.Name, got.Name, "device %d name", i)
				require.Equal(t, d.ComputeCapability, got.ComputeCapability, "device %d compute capability", i)
				require.Equal(t, d.TotalMemoryBytes, got.TotalMemoryBytes, "device %d memory", i)
				require.Equal(t, d.VMM, got.VMM, "device %d VMM", i)
				require.JSONEq(t, string(d.HandleTypes), string(got.HandleTypes), "device %d handle types", i)
				require.JSONEq(t, string(d.Multicast), string(got.Multicast), "device %d multicast", i)
				require.Equal(t, d.GenericCompression, got.GenericCompression, "device %d compression", i)
				require.Equal(t, d.GPUDirectRDMAWithVMM, got.GPUDirectRDMAWithVMM, "device %d GPUDirect RDMA", i)
				require.Equal(t, d.HostVMM, got.HostVMM, "device %d host VMM", i)
				require.Equal(t, d.HostNUMAVMM, got.HostNUMAVMM, "device %d host NUMA VMM", i)
				require.JSONEq(t, string(d.Granularity), string(got.Granularity), "device %d granularity", i)
			}
			simPeers := map[[2]int]peerFacts{}
			for _, p := range sim.Peers {
				simPeers[[2]int{p.Device, p.Peer}] = p
			}
			for _, p := range real.Peers {
				got, ok := simPeers[[2]int{p.Device, p.Peer}]
				require.True(t, ok, "the preset lacks peer pair %d->%d", p.Device, p.Peer)
				require.Equal(t, p, got, "peer pair %d->%d", p.Device, p.Peer)
			}
		})
	}
}
