package main

import (
	"fmt"
	"strings"
)

// remedy says what an operator can do about an unsupported or failed check ("" for the
// others); on a simulated node it names no command. Driver results that mean the same
// whatever the check come first; then what each check needs.
func (c *checker) remedy(check string, r checkResult, d deviceInfo) string {
	return checkFix(check, r, d).text(c.doc.Backend.Simulated)
}

func checkFix(check string, r checkResult, d deviceInfo) fix {
	if r.Status != statusUnsupported && r.Status != statusFailed {
		return fix{}
	}
	// For failures, some driver results call for the same action whatever the check; an
	// unsupported check is explained by what the check needs.
	switch res := r.Result; {
	case r.Status != statusFailed:
	case res == "CUDA_ERROR_OUT_OF_MEMORY":
		return fix{do: fmt.Sprintf("device %d is out of memory: find the processes holding it ({cmd}) and free it", d.Index), cmd: "nvidia-smi"}
	case res == "CUDA_ERROR_DEVICE_UNAVAILABLE" || res == "CUDA_ERROR_INVALID_DEVICE" || res == "CUDA_ERROR_NO_DEVICE":
		return fix{do: fmt.Sprintf("device %d is not available to this process: check its compute mode ({cmd}: "+
			"Exclusive_Process admits one process), MIG, CUDA_VISIBLE_DEVICES and the container's device list", d.Index), cmd: "nvidia-smi -q -d COMPUTE"}
	case res == "CUDA_ERROR_ECC_UNCORRECTABLE" || res == "CUDA_ERROR_NVLINK_UNCORRECTABLE" || res == "CUDA_ERROR_CONTAINED" || res == "CUDA_ERROR_ILLEGAL_ADDRESS":
		return fix{do: fmt.Sprintf("device %d reported a hardware error: check the kernel log for Xid errors and the ECC counters ({cmd}); reset the GPU or drain the node", d.Index),
			cmd: "dmesg; nvidia-smi -q -d ECC"}
	case res == "CUDA_ERROR_SYSTEM_NOT_READY":
		return fix{do: "the NVSwitch fabric is not ready: start nvidia-fabricmanager and check its log ({cmd})", cmd: "systemctl status nvidia-fabricmanager"}
	}
	if strings.Contains(r.Error, errMismatch.Error()) {
		return fix{do: fmt.Sprintf("device %d returned other bytes than were written: check the kernel log for Xid errors and the ECC counters ({cmd}); reset the GPU or drain the node", d.Index),
			cmd: "dmesg; nvidia-smi -q -d ECC"}
	}
	switch check {
	case "create", "reserve", "map", "set-access", "copy", "teardown":
		if r.Status == statusUnsupported {
			return fix{do: "virtual memory management needs a CUDA 10.2+ driver and a device that supports it (compute capability 6.0+; not on vGPU profiles without unified memory)"}
		}
		return fix{do: "update the NVIDIA driver; if it persists, report it with the output of vmmprobe check -o json"}
	case "posix-fd-export":
		return fix{do: "POSIX file descriptor handles need Linux and a device that supports them; update the driver if the device should"}
	case "posix-fd-ipc", "fabric-ipc":
		if r.Status == statusUnsupported {
			return fix{do: "sharing memory with another process is checked on Linux only: run vmmprobe check there"}
		}
		return fix{do: "the child process must load the same driver and see the same device (same CUDA_VISIBLE_DEVICES and container devices); " +
			"seccomp or AppArmor profiles must allow SCM_RIGHTS over unix sockets"}
	case "fabric":
		if r.Result == "CUDA_ERROR_NOT_PERMITTED" {
			return fix{do: "an IMEX channel is accessible but the driver refused: start the nvidia-imex daemon ({cmd}) and check " + imexNodesConfig,
				cmd: "systemctl status nvidia-imex"}
		}
		return fix{do: "fabric handles need a GPU on an NVLink fabric (GH200, GB200, HGX with NVSwitch) and an R550+ driver"}
	case "compression":
		return fix{do: "generic compression needs a data-center GPU that supports it (A100 and newer) with compressible memory available; the driver may decline the request"}
	case "gpudirect-rdma":
		return fix{do: "GPUDirect RDMA with VMM needs a device that supports it (GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED); NICs also need the nvidia-peermem module"}
	case "host", "host-numa":
		return fix{do: "host memory through VMM needs a CUDA 12.2+ driver and a device that supports it (HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)"}
	case "peer-map":
		return fix{do: "the devices cannot reach each other's memory: check the topology and NVLink state ({cmd}); " +
			"on PCIe, ACS or the IOMMU can block peer traffic; in VMs the hypervisor often disables it", cmd: "nvidia-smi topo -m; nvidia-smi nvlink -s"}
	case "multicast":
		return fix{do: "multicast needs NVSwitch (HGX H100/H200 and newer) with nvidia-fabricmanager running, a CUDA 12.1+ driver, and no other tenant holding the fabric's multicast resources"}
	}
	return fix{}
}

// fix is a remedy: what to do, in words (do), and the commands that do it on a real node
// (cmd), which take the place of "{cmd}" in the words. On a simulated node the commands
// are left out: there they would run on a machine with nothing to fix (a laptop showing
// the simulated fallback, say), so a remedy with commands says what a real node would
// need instead.
type fix struct {
	do  string
	cmd string
}

// cmdMark is where a fix's command goes in its words.
const cmdMark = "{cmd}"

func (f fix) text(simulated bool) string {
	if f.do == "" {
		return ""
	}
	if simulated && f.cmd != "" {
		do := strings.ReplaceAll(f.do, " ("+cmdMark+")", "")
		do = strings.ReplaceAll(do, " "+cmdMark, "")
		return "simulated node, nothing to run here; a real node would need: " + strings.ReplaceAll(do, cmdMark, "")
	}
	if f.cmd == "" || !strings.Contains(f.do, cmdMark) {
		return strings.ReplaceAll(f.do, " ("+cmdMark+")", "")
	}
	return strings.ReplaceAll(f.do, cmdMark, f.cmd)
}
