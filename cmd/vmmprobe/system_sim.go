package main

import (
	"fmt"
	"io/fs"
	"strconv"

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

// simSystem is what the process would see on the node a sim configuration describes
// (cfg.Node): the same files and NVML snapshot the host would show, so that the report of
// a simulated node goes through the rules that read a real one. A configuration without a
// node description gives a node where nothing is known.
func simSystem(cfg sim.Config) *memSystem {
	m := newMemSystem(true)
	node := cfg.Node
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
	if cfg.IMEX {
		m.add(imexChannelDir+"/channel0", memFile{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, major: simIMEXMajor})
	}
	return m
}
