package sim

import (
	"strconv"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/nvml"
)

// Node is the machine around the simulated GPUs as a preflight running inside the process
// sees it: the NVLink fabric's services, its NVSwitches, and what NVML reports. A preflight
// such as cmd/vmmprobe reads it instead of the host's /dev, /proc and NVML when it runs on
// sim, so that every way a node can be broken is shown without such a node.
//
// sim models one effect of it on the driver: when the GPUs' NVLinks go through NVSwitches
// of this host and Fabric Manager is not running, New fails as cuInit does there, with
// CUDA_ERROR_SYSTEM_NOT_READY (the "Error 802: system not yet initialized" that PyTorch
// and others report on HGX nodes whose nvidia-fabricmanager is down). The IMEX channel is
// Config.IMEX, which the driver calls consult.
type Node struct {
	// NVSwitches is how many NVSwitch devices this host has (/dev/nvidia-nvswitchN): 4 on
	// an 8-GPU HGX H100 or H200 baseboard; 0 where the GPUs' NVLinks reach each other
	// directly, through NVSwitches of other trays (multi-node NVLink), or not at all.
	NVSwitches int
	// FabricManager says whether nvidia-fabricmanager runs and can be seen from the process.
	FabricManager bool
	// IMEXDaemon says whether nvidia-imex runs and can be seen from the process.
	IMEXDaemon bool
	// NVML is what NVML reports; nil when the process has no NVML library.
	NVML *nvml.Node
}

// clone returns a deep copy of n (nil for nil).
func (n *Node) clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	if n.NVML != nil {
		v := *n.NVML
		v.GPUs = append([]nvml.GPU(nil), n.NVML.GPUs...)
		c.NVML = &v
	}
	return &c
}

// initError is what cuInit returns on the node: nil, or CUDA_ERROR_SYSTEM_NOT_READY while
// the NVSwitches of this host have no Fabric Manager.
func (n *Node) initError() error {
	if n == nil || n.NVSwitches == 0 || n.FabricManager {
		return nil
	}
	return &Error{Op: "cuInit", Args: "0", Err: cu.ERROR_SYSTEM_NOT_READY,
		Reason: "the GPUs' NVLinks go through NVSwitches of this host and nvidia-fabricmanager is not running"}
}

// nvmlNode is NVML's view of devs: the driver version of a driver supporting CUDA version
// cuda, and each GPU's name, UUID, bus id, fabric and links as gpu says.
func nvmlNode(driver string, cuda int, devs []Device, gpu func(i int, g *nvml.GPU)) *nvml.Node {
	n := &nvml.Node{
		Library:           "libnvidia-ml.so.1 (simulated)",
		DriverVersion:     nvml.Known(driver),
		CUDADriverVersion: nvml.Known(cuda),
		GPUCount:          nvml.Known(len(devs)),
	}
	for i, d := range devs {
		g := nvml.GPU{
			Index:    i,
			Name:     nvml.Known(d.Name),
			UUID:     nvml.Known(d.UUID.String()),
			PCIBusID: nvml.Known(nvmlBusID(d.PCIBusID)),
		}
		gpu(i, &g)
		n.GPUs = append(n.GPUs, g)
	}
	return n
}

// nvmlBusID is a bus id as NVML writes it: an eight-digit domain, upper-case hex.
func nvmlBusID(cuda string) string {
	id := []byte("0000" + cuda)
	for i, c := range id {
		if c >= 'a' && c <= 'f' {
			id[i] = c - 'a' + 'A'
		}
	}
	return string(id)
}

// notOnFabric is the fabric of a GPU outside any NVLink fabric, as NVML reports it
// (nvmlDeviceGetGpuFabricInfoV answers NVML_ERROR_NOT_SUPPORTED).
func notOnFabric(i int) nvml.Fact[nvml.FabricInfo] {
	return nvml.Unknown[nvml.FabricInfo](&nvml.Error{Op: "nvmlDeviceGetGpuFabricInfoV", Args: "device " + itoa(i), Err: nvml.ERROR_NOT_SUPPORTED})
}

// healthy is the health mask of a registered GPU with nothing wrong: degraded bandwidth,
// route recovery, unhealthy route and access timeout recovery all FALSE, no incorrect
// configuration.
const healthy = nvml.HealthMask(2 | 2<<2 | 2<<4 | 2<<6 | 1<<8)

// onFabric is the fabric of a GPU in state st with health mask h and summary sum.
func onFabric(st nvml.FabricState, status nvml.Return, cluster string, clique uint32, h nvml.HealthMask, sum nvml.HealthSummary) nvml.Fact[nvml.FabricInfo] {
	return nvml.Known(nvml.FabricInfo{
		ClusterUUID: cluster, CliqueID: clique, State: st, Status: status,
		Health: nvml.Known(h), Summary: nvml.Known(sum), Version: 3,
	})
}

// links is a GPU's NVLinks: total of them, active of those up, to an NVSwitch or not.
func links(total, active int, toSwitch bool) nvml.Fact[nvml.NvLinks] {
	return nvml.Known(nvml.NvLinks{Total: total, Active: active, ToNVSwitch: nvml.Known(toSwitch && active > 0)})
}

func itoa(i int) string { return strconv.Itoa(i) }

// The clusters of the presets' fabrics (NVML formats a cluster UUID like any UUID).
const (
	zeroCluster  = "00000000-0000-0000-0000-000000000000"
	mnnvlCluster = "4d4e4e56-4c37-3200-8000-000000000001"
)

// singleGPUNode is the node of a GPU without NVLink peers: no NVSwitch, nothing to
// register, NVML present.
func singleGPUNode(c Config, driver string) *Node {
	return &Node{NVML: nvmlNode(driver, c.DriverVersion, c.Devices, func(i int, g *nvml.GPU) {
		g.Fabric = notOnFabric(i)
		g.NvLinks = nvml.Unknown[nvml.NvLinks](&nvml.Error{Op: "nvmlDeviceGetNvLinkState", Args: "device " + itoa(i) + ", link 0", Err: nvml.ERROR_NOT_SUPPORTED})
	})}
}

// hgxNode is the node of an HGX H200 baseboard: its GPUs' 18 NVLinks each go to the four
// NVSwitches of this host, and Fabric Manager registers the GPUs (clique 0 of an all-zero
// cluster, as NVML reports a single-host fabric).
func hgxNode(c Config, fm bool) *Node {
	n := &Node{NVSwitches: 4, FabricManager: fm}
	n.NVML = nvmlNode("580.65.06", c.DriverVersion, c.Devices, func(i int, g *nvml.GPU) {
		if fm {
			g.Fabric = onFabric(nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, zeroCluster, 0, healthy, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY)
		} else {
			g.Fabric = onFabric(nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.SUCCESS, zeroCluster, 0, 0, nvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED)
		}
		g.NvLinks = links(18, 18, true)
	})
	return n
}

// mnnvlNode is a compute tray of a multi-node NVLink system: no NVSwitch in this host (they
// are in the switch trays, whose Fabric Manager registered the GPUs in a cluster), the IMEX
// daemon running.
func mnnvlNode(c Config) *Node {
	n := &Node{IMEXDaemon: true}
	n.NVML = nvmlNode("580.65.06", c.DriverVersion, c.Devices, func(i int, g *nvml.GPU) {
		g.Fabric = onFabric(nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, mnnvlCluster, 1, healthy, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY)
		g.NvLinks = links(18, 18, true)
	})
	return n
}

// oldNode is the node of a GPU on a driver older than NVML's fabric calls (R470 knows no
// nvmlDeviceGetGpuFabricInfo).
func oldNode(c Config) *Node {
	return &Node{NVML: nvmlNode("470.256.02", c.DriverVersion, c.Devices, func(i int, g *nvml.GPU) {
		g.Fabric = nvml.Unknown[nvml.FabricInfo](&nvml.Error{Op: "nvmlDeviceGetGpuFabricInfo", Args: "device " + itoa(i), Err: nvml.ERROR_FUNCTION_NOT_FOUND})
		g.NvLinks = nvml.Unknown[nvml.NvLinks](&nvml.Error{Op: "nvmlDeviceGetNvLinkState", Args: "device " + itoa(i) + ", link 0", Err: nvml.ERROR_NOT_SUPPORTED})
	})}
}
