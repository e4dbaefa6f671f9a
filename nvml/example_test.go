package nvml_test

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/nvml"
)

// A Node is plain data: a simulator makes one for a node whose Fabric Manager has not
// registered the GPUs, and one for a node without NVML, and the preflight reads them as it
// reads a real probe.
func ExampleNode() {
	fmDown := nvml.Node{
		DriverVersion: nvml.Known("580.65.06"),
		GPUCount:      nvml.Known(1),
		GPUs: []nvml.GPU{{
			Name: nvml.Known("NVIDIA H200"),
			Fabric: nvml.Known(nvml.FabricInfo{
				State:   nvml.GPU_FABRIC_STATE_NOT_STARTED,
				Health:  nvml.Known(nvml.HealthMask(0)),
				Summary: nvml.Known(nvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED),
				Version: 3,
			}),
		}},
	}
	noNVML := nvml.Node{Unavailable: "NVML unavailable: simulated"}
	noNVML.DriverVersion = nvml.Unknown[string](errors.New(noNVML.Unavailable))

	for _, n := range []nvml.Node{fmDown, noNVML} {
		if n.Unavailable != "" {
			fmt.Println(n.Unavailable, "| driver", n.DriverVersion)
			continue
		}
		for _, g := range n.GPUs {
			fmt.Println(g.Index, g.Name, g.Fabric.Value.State, "registered:", g.Fabric.Value.Registered())
		}
	}
	// Output:
	// 0 NVIDIA H200 NVML_GPU_FABRIC_STATE_NOT_STARTED registered: false
	// NVML unavailable: simulated | driver unknown (NVML unavailable: simulated)
}
