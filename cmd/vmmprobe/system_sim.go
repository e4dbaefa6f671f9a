package main

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/nvml"
	"github.com/cuvmm/cuvmm/sim"
)

// The numbers a simulated node's files use, as an R580 driver on an HGX host shows them.
const (
	simIMEXMajor     = 234
	simNVSwitchMajor = 238
	simFMPid         = 2741
	simIMEXPid       = 2802
)

// simSystem is what the process would see on the node of a sim preset (simNodeOf): the
// same files and NVML snapshot the host would show, so that the report of a simulated node
// goes through the rules that read a real one. A configuration that is no preset gives a
// node where nothing is known.
func simSystem(cfg sim.Config) *memSystem {
	m := newMemSystem(true)
	node := simNodeOf(cfg)
	if node == nil {
		m.nvml = nvml.Node{Unavailable: "NVML unavailable: the sim configuration " + strconv.Quote(cfg.Name) + " does not describe its node"}
		return m
	}
	if node.NVML != nil {
		m.nvml = *node.NVML
	} else {
		m.nvml = nvml.Node{Unavailable: "NVML unavailable: loader: cannot load the NVML library: libnvidia-ml.so.1: cannot open shared object file: No such file or directory"}
	}
	m.dir("/dev")
	m.dir("/proc/net")
	// Drivers from R550 register the IMEX channel device; older ones (oldgpu's R470) do not.
	devices := "Character devices:\n  1 mem\n195 nvidia\n"
	if cfg.DriverVersion >= 12040 {
		devices += strconv.Itoa(simIMEXMajor) + " nvidia-caps-imex-channels\n"
		m.add("/proc/driver/nvidia/params", memFile{data: "ImexChannelCount: 2048\nCreateImexChannel0: 0\n"})
	}
	if node.NVSwitches > 0 {
		devices += strconv.Itoa(simNVSwitchMajor) + " nvidia-nvswitch\n"
		m.add("/dev/nvidia-nvswitchctl", memFile{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, major: simNVSwitchMajor})
		for i := range node.NVSwitches {
			m.add(fmt.Sprintf("/dev/nvidia-nvswitch%d", i), memFile{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, major: simNVSwitchMajor})
			m.dir(fmt.Sprintf("%s/0000:%02x:00.0", nvswitchProcDir, 0x05+i))
		}
		// The package is installed and enabled whether or not it runs.
		m.add("/usr/lib/systemd/system/"+fmUnit, memFile{data: "[Unit]\nDescription=NVIDIA fabric manager service\n"})
		m.add("/etc/systemd/system/multi-user.target.wants/"+fmUnit, memFile{data: "[Unit]\n"})
		m.add(fmConfig, memFile{data: "FM_CMD_BIND_INTERFACE=127.0.0.1\nFM_CMD_PORT_NUMBER=6666\n"})
	}
	m.add("/proc/devices", memFile{data: devices + "\nBlock devices:\n  7 loop\n"})
	tcp := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	if node.FabricManager {
		m.add("/proc/"+strconv.Itoa(simFMPid)+"/comm", memFile{data: fmComm + "\n"})
		tcp += "   0: 0100007F:1A0A 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0\n"
	}
	m.add("/proc/net/tcp", memFile{data: tcp})
	if node.IMEXDaemon {
		m.add("/proc/"+strconv.Itoa(simIMEXPid)+"/comm", memFile{data: imexComm + "\n"})
		m.add(imexNodesConfig, memFile{data: "10.0.0.1\n10.0.0.2\n"})
	}
	m.add("/proc/1/comm", memFile{data: "systemd\n"})
	// Every simulated node is this machine: sim's fabric handles reach only its processes.
	m.add("/proc/sys/kernel/random/boot_id", memFile{data: "00000000-0000-4000-8000-00000000c0de\n"})
	if cfg.IMEX {
		m.add(imexChannelDir+"/channel0", memFile{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, major: simIMEXMajor})
	}
	return m
}

// simNode is the machine around the GPUs of a sim preset as a preflight running inside the
// process sees it: the NVLink fabric's services, its NVSwitches, and what NVML reports.
// What NVML reports for the presets is modelled on nvml.h and on reports of such nodes, not
// recorded. The driver consults one part of it, through sim.Config.FabricManagerDown.
type simNode struct {
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

// simNodeOf is the node of the sim preset cfg is (by name, with its devices and driver as
// cfg has them), or nil for a configuration that is no preset.
func simNodeOf(cfg sim.Config) *simNode {
	gpus := func(driver string, gpu func(i int, g *nvml.GPU)) *nvml.Node {
		return nvmlNode(driver, cfg.DriverVersion, cfg.Devices, gpu)
	}
	switch cfg.Name {
	case "h100", "h200", "workstation":
		// A GPU without NVLink peers: no NVSwitch, nothing to register, NVML present.
		return &simNode{NVML: gpus("580.65.06", func(i int, g *nvml.GPU) { g.Fabric, g.NvLinks = notOnFabric(i), noNvLinks(i) })}
	case "h200-no-nvml":
		return &simNode{}
	case "hgx8", "hgx8-fm-down", "hgx8-degraded":
		// An HGX H200 baseboard: its GPUs' 18 NVLinks each go to the four NVSwitches of this
		// host, and Fabric Manager, unless it is down (as cuInit then says too), registers the
		// GPUs (clique 0 of an all-zero cluster, as NVML reports a single-host fabric); a GPU
		// whose registration has not started reports no health.
		fm := !cfg.FabricManagerDown
		n := &simNode{NVSwitches: 4, FabricManager: fm, NVML: gpus("580.65.06", func(i int, g *nvml.GPU) {
			g.Fabric, g.NvLinks = onFabric(nvml.GPU_FABRIC_STATE_NOT_STARTED, zeroCluster, 0, 0, nvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED), links(18, 18)
			if fm {
				g.Fabric = onFabric(nvml.GPU_FABRIC_STATE_COMPLETED, zeroCluster, 0, healthy, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY)
			}
		})}
		if cfg.Name == "hgx8-degraded" {
			// Device 5 has 2 of its 18 NVLinks down: NVML says its bandwidth is degraded and
			// its capacity limited.
			g := &n.NVML.GPUs[5]
			f := g.Fabric.Value
			f.Health = nvml.Known(healthy&^3 | 1) // DEGRADED_BW_TRUE
			f.Summary = nvml.Known(nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY)
			g.Fabric, g.NvLinks = nvml.Known(f), links(18, 16)
		}
		return n
	case "mnnvl", "mnnvl-no-channel":
		// A compute tray of a multi-node NVLink system: no NVSwitch in this host (they are in
		// the switch trays, whose Fabric Manager registered the GPUs in a cluster), the IMEX
		// daemon running.
		return &simNode{IMEXDaemon: true, NVML: gpus("580.65.06", func(i int, g *nvml.GPU) {
			g.Fabric = onFabric(nvml.GPU_FABRIC_STATE_COMPLETED, mnnvlCluster, 1, healthy, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY)
			g.NvLinks = links(18, 18)
		})}
	case "oldgpu":
		// A driver older than NVML's fabric calls (R470 knows no nvmlDeviceGetGpuFabricInfo).
		return &simNode{NVML: gpus("470.256.02", func(i int, g *nvml.GPU) {
			g.Fabric = nvml.Unknown[nvml.FabricInfo](&nvml.Error{Op: "nvmlDeviceGetGpuFabricInfo", Args: "device " + strconv.Itoa(i), Err: nvml.ERROR_FUNCTION_NOT_FOUND})
			g.NvLinks = noNvLinks(i)
		})}
	}
	return nil
}

// nvmlNode is NVML's view of devs: the driver version of a driver supporting CUDA version
// cuda, and each GPU's name, UUID, bus id, fabric and links as gpu says.
func nvmlNode(driver string, cuda int, devs []sim.Device, gpu func(i int, g *nvml.GPU)) *nvml.Node {
	n := &nvml.Node{
		Library:           "libnvidia-ml.so.1 (simulated)",
		DriverVersion:     nvml.Known(driver),
		CUDADriverVersion: nvml.Known(cuda),
		GPUCount:          nvml.Known(len(devs)),
	}
	for i, d := range devs {
		// NVML writes a bus id with an eight-digit domain, in upper-case hex.
		g := nvml.GPU{Index: i, Name: nvml.Known(d.Name), UUID: nvml.Known(d.UUID.String()), PCIBusID: nvml.Known(strings.ToUpper("0000" + d.PCIBusID))}
		gpu(i, &g)
		n.GPUs = append(n.GPUs, g)
	}
	return n
}

// notOnFabric is the fabric of a GPU outside any NVLink fabric, as NVML reports it
// (nvmlDeviceGetGpuFabricInfoV answers NVML_ERROR_NOT_SUPPORTED).
func notOnFabric(i int) nvml.Fact[nvml.FabricInfo] {
	return nvml.Unknown[nvml.FabricInfo](&nvml.Error{Op: "nvmlDeviceGetGpuFabricInfoV", Args: "device " + strconv.Itoa(i), Err: nvml.ERROR_NOT_SUPPORTED})
}

// noNvLinks is the NVLinks of a GPU that has none, as NVML reports them.
func noNvLinks(i int) nvml.Fact[nvml.NvLinks] {
	return nvml.Unknown[nvml.NvLinks](&nvml.Error{Op: "nvmlDeviceGetNvLinkState", Args: "device " + strconv.Itoa(i) + ", link 0", Err: nvml.ERROR_NOT_SUPPORTED})
}

// healthy is the health mask of a registered GPU with nothing wrong: degraded bandwidth,
// route recovery, unhealthy route and access timeout recovery all FALSE, no incorrect
// configuration.
const healthy = nvml.HealthMask(2 | 2<<2 | 2<<4 | 2<<6 | 1<<8)

// onFabric is the fabric of a GPU in state st with health mask h and summary sum.
func onFabric(st nvml.FabricState, cluster string, clique uint32, h nvml.HealthMask, sum nvml.HealthSummary) nvml.Fact[nvml.FabricInfo] {
	return nvml.Known(nvml.FabricInfo{
		ClusterUUID: cluster, CliqueID: clique, State: st, Status: nvml.SUCCESS,
		Health: nvml.Known(h), Summary: nvml.Known(sum), Version: 3,
	})
}

// links is a GPU's NVLinks to NVSwitches: total of them, active of those up.
func links(total, active int) nvml.Fact[nvml.NvLinks] {
	return nvml.Known(nvml.NvLinks{Total: total, Active: active, ToNVSwitch: nvml.Known(active > 0)})
}

// mnnvlCluster is the cluster of the mnnvl presets' fabric (NVML formats a cluster UUID
// like any UUID).
const mnnvlCluster = "4d4e4e56-4c37-3200-8000-000000000001"
