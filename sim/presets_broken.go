package sim

import "github.com/cuvmm/cuvmm/nvml"

// The presets of this file are nodes broken in the ways GPU fleets keep breaking, each one
// way, so that a preflight (cmd/vmmprobe) can show its diagnosis and remedy for each
// without such a node. What NVML reports for them is modelled on nvml.h and on reports of
// such nodes, not recorded.

// PresetHGX8FabricManagerDown is PresetHGX8 with nvidia-fabricmanager not running: NVML
// says the GPUs have not started their fabric registration, and cuInit (New) fails with
// CUDA_ERROR_SYSTEM_NOT_READY. PyTorch's H100 CI ran like this for 2000+ commits
// (pytorch/ci-infra#541).
func PresetHGX8FabricManagerDown() Config {
	c := PresetHGX8()
	c.Name = "hgx8-fm-down"
	c.Node = hgxNode(c, false)
	return c
}

// PresetHGX8Degraded is PresetHGX8 whose fabric is up but degraded: device 5 has 2 of its
// 18 NVLinks down, and NVML says its bandwidth is degraded and its capacity limited. CUDA
// works; collectives over NVLink run slower than the node is sold for.
func PresetHGX8Degraded() Config {
	c := PresetHGX8()
	c.Name = "hgx8-degraded"
	c.Node = hgxNode(c, true)
	g := &c.Node.NVML.GPUs[5]
	f := g.Fabric.Value
	f.Health = nvml.Known(healthy&^3 | 1) // DEGRADED_BW_TRUE
	f.Summary = nvml.Known(nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
	g.Fabric = nvml.Known(f)
	g.NvLinks = links(18, 16, true)
	return c
}

// PresetMNNVLNoChannel is PresetMNNVL run in a container that was not given an IMEX
// channel: the host has the IMEX daemon and the fabric is registered, but the process
// sees no /dev/nvidia-caps-imex-channels/channelN, so creating fabric memory is not
// permitted although the device attribute says fabric handles are supported.
func PresetMNNVLNoChannel() Config {
	c := PresetMNNVL()
	c.Name = "mnnvl-no-channel"
	c.IMEX = false
	return c
}

// PresetH200NoNVML is PresetH200 in a process without NVML (libnvidia-ml.so.1 not mounted
// into the container, say): CUDA works, and nothing NVML would tell is known.
func PresetH200NoNVML() Config {
	c := PresetH200()
	c.Name = "h200-no-nvml"
	c.Node.NVML = nil
	return c
}
