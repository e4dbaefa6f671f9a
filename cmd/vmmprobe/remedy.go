package main

import (
	"fmt"
	"strings"
)

// remedy says what an operator can do about an unsupported or failed check ("" for the
// others). Driver results that mean the same whatever the check come first; then what
// each check needs.
func (*checker) remedy(check string, r checkResult, d deviceInfo) string {
	if r.Status != statusUnsupported && r.Status != statusFailed {
		return ""
	}
	// For failures, some driver results call for the same action whatever the check; an
	// unsupported check is explained by what the check needs.
	switch res := r.Result; {
	case r.Status != statusFailed:
	case res == "CUDA_ERROR_OUT_OF_MEMORY":
		return fmt.Sprintf("device %d is out of memory: find the processes holding it (nvidia-smi) and free it", d.Index)
	case res == "CUDA_ERROR_DEVICE_UNAVAILABLE" || res == "CUDA_ERROR_INVALID_DEVICE" || res == "CUDA_ERROR_NO_DEVICE":
		return fmt.Sprintf("device %d is not available to this process: check its compute mode (nvidia-smi -q -d COMPUTE: "+
			"Exclusive_Process admits one process), MIG, CUDA_VISIBLE_DEVICES and the container's device list", d.Index)
	case res == "CUDA_ERROR_ECC_UNCORRECTABLE" || res == "CUDA_ERROR_NVLINK_UNCORRECTABLE" || res == "CUDA_ERROR_CONTAINED" || res == "CUDA_ERROR_ILLEGAL_ADDRESS":
		return fmt.Sprintf("device %d reported a hardware error: check dmesg for Xid errors and nvidia-smi -q -d ECC; reset the GPU (nvidia-smi -r) or drain the node", d.Index)
	case res == "CUDA_ERROR_SYSTEM_NOT_READY":
		return "the NVSwitch fabric is not ready: start nvidia-fabricmanager (systemctl status nvidia-fabricmanager) and check its log"
	}
	if strings.Contains(r.Error, errMismatch.Error()) {
		return fmt.Sprintf("device %d returned other bytes than were written: check dmesg for Xid errors and nvidia-smi -q -d ECC; reset the GPU or drain the node", d.Index)
	}
	switch check {
	case "create", "reserve", "map", "set-access", "copy", "teardown":
		if r.Status == statusUnsupported {
			return "virtual memory management needs a CUDA 10.2+ driver and a device that supports it (compute capability 6.0+; not on vGPU profiles without unified memory)"
		}
		return "update the NVIDIA driver; if it persists, report it with the output of vmmprobe check -o json"
	case "posix-fd-export":
		return "POSIX file descriptor handles need Linux and a device that supports them; update the driver if the device should"
	case "posix-fd-ipc", "fabric-ipc":
		if r.Status == statusUnsupported {
			return "passing descriptors to another process is checked on Linux only: run vmmprobe check there"
		}
		return "the child process must load the same driver and see the same device (same CUDA_VISIBLE_DEVICES and container devices); " +
			"seccomp or AppArmor profiles must allow SCM_RIGHTS over unix sockets"
	case "fabric":
		if r.Result == "CUDA_ERROR_NOT_PERMITTED" {
			return "an IMEX channel is accessible but the driver refused: start the nvidia-imex daemon (systemctl status nvidia-imex) and check /etc/nvidia-imex/nodes_config.cfg"
		}
		return "fabric handles need a GPU on an NVLink fabric (GH200, GB200, HGX with NVSwitch) and an R550+ driver"
	case "compression":
		return "generic compression needs a data-center GPU that supports it (A100 and newer) with compressible memory available; the driver may decline the request"
	case "gpudirect-rdma":
		return "GPUDirect RDMA with VMM needs a device that supports it (GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED); NICs also need the nvidia-peermem module"
	case "host", "host-numa":
		return "host memory through VMM needs a CUDA 12.2+ driver and a device that supports it (HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)"
	case "peer-map":
		return "the devices cannot reach each other's memory: check the topology (nvidia-smi topo -m) and NVLink state (nvidia-smi nvlink -s); " +
			"on PCIe, ACS or the IOMMU can block peer traffic; in VMs the hypervisor often disables it"
	case "multicast":
		return "multicast needs NVSwitch (HGX H100/H200 and newer) with nvidia-fabricmanager running, a CUDA 12.1+ driver, and no other tenant holding the fabric's multicast resources"
	}
	return ""
}
