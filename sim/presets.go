package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
)

const (
	kib = uint64(1) << 10
	mib = uint64(1) << 20
	gib = uint64(1) << 30
)

// presets maps the lower-case names Preset accepts to their constructors.
var presets = map[string]func() Config{
	"h100":        PresetH100,
	"h200":        PresetH200,
	"hgx8":        PresetHGX8,
	"mnnvl":       PresetMNNVL,
	"oldgpu":      PresetOldGPU,
	"workstation": PresetWorkstation,

	// Nodes broken in the ways GPU fleets break.
	"hgx8-fm-down":     PresetHGX8FabricManagerDown,
	"hgx8-degraded":    PresetHGX8Degraded,
	"mnnvl-no-channel": PresetMNNVLNoChannel,
	"h200-no-nvml":     PresetH200NoNVML,
}

// Presets returns the names Preset accepts, sorted.
func Presets() []string { return slices.Sorted(maps.Keys(presets)) }

// Preset returns the configuration of a named preset (case-insensitive: "h100", "h200",
// "hgx8", "mnnvl", "oldgpu", "workstation") and whether the name is known.
func Preset(name string) (Config, bool) {
	f, ok := presets[strings.ToLower(name)]
	if !ok {
		return Config{}, false
	}
	return f(), true
}

// hopper returns a Hopper device as the recorded machines report it: attrs are the raw
// attribute readings, with those in diff replaced.
func hopper(name string, totalMem uint64, attrs map[cu.DeviceAttribute]int, diff map[cu.DeviceAttribute]int) Device {
	a := maps.Clone(attrs)
	maps.Copy(a, diff)
	// The capabilities, Compression to HostNUMAVMM, are what the H100 and the H200 reported
	// (h100Attributes; h200Diff changes none): what vmm.Manager.CheckProps asks before a
	// create.
	return Device{
		Name:                   name,
		TotalMem:               totalMem,
		ComputeMajor:           9,
		ComputeMinor:           0,
		Granularity:            2 * mib,
		RecommendedGranularity: 2 * mib,
		VMM:                    true,
		POSIXFD:                true,
		Fabric:                 true, // reported 1 even where creating one is NOT_PERMITTED (no IMEX)
		Compression:            true,
		GPUDirectRDMA:          true,
		HostVMM:                true,
		HostNUMAVMM:            true,
		Attributes:             a,
	}
}

// uuid derives a stable, distinct UUID for simulated device i of a preset.
func uuid(seed uint32, i int) cu.UUID {
	var u cu.UUID
	x := uint64(seed)<<32 | uint64(i)
	for j := range u {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		u[j] = byte(x)
	}
	u[6] = u[6]&0x0f | 0x40 // a version-4 looking UUID, as NVIDIA's are
	u[8] = u[8]&0x3f | 0x80
	return u
}

// PresetH100 is a single NVIDIA H100 80GB HBM3 (SXM) with driver 580 (CUDA 13.0), as the
// recorded machine reports itself: every attribute, 81079 MiB, 2 MiB granularity, fabric
// handles reported supported but no IMEX channel (so creating one is NOT_PERMITTED), no
// multicast. TestPresets checks what the vmmtest sweep/ recording's machine reported.
func PresetH100() Config {
	d := hopper("NVIDIA H100 80GB HBM3", 81079*mib, h100Attributes, nil)
	d.UUID = cu.UUID{0x82, 0x9f, 0xcb, 0xf0, 0xad, 0x3a, 0x17, 0xb6, 0x6d, 0x97, 0x82, 0xfb, 0x25, 0x9f, 0x8b, 0x45}
	d.PCIBusID = "0000:00:06.0"
	return Config{Name: "h100", DriverVersion: 13000, Devices: []Device{d}}
}

// PresetH200 is a single NVIDIA H200 with driver 580 (CUDA 13.0), as the recorded machine
// reports itself (143155 MiB usable of the 143771 MiB nvidia-smi shows).
func PresetH200() Config {
	d := hopper("NVIDIA H200", 150109880320, h100Attributes, h200Diff)
	d.UUID = cu.UUID{0x73, 0x8a, 0xac, 0xb7, 0xe3, 0xb7, 0xd9, 0xdc, 0x8b, 0xc1, 0x87, 0xa6, 0xab, 0x25, 0xde, 0x7f}
	d.PCIBusID = "0000:00:06.0"
	return Config{Name: "h200", DriverVersion: 13000, Devices: []Device{d}}
}

// PresetHGX8 is an 8-GPU HGX H200 node: all devices peers of each other over NVSwitch,
// multicast supported (2 MiB minimum and recommended granularity, as two H200s reported), no IMEX channel.
func PresetHGX8() Config {
	buses := []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}
	c := Config{Name: "hgx8", DriverVersion: 13000,
		MulticastGranularity: 2 * mib, MulticastRecommendedGranularity: 2 * mib}
	for i, bus := range buses {
		d := hopper("NVIDIA H200", 150109880320, h100Attributes, h200Diff)
		d.Multicast = true
		d.UUID = uuid(0x48475838, i)
		d.PCIBusID = fmt.Sprintf("0000:%02x:00.0", bus)
		d.Attributes[cu.DEVICE_ATTRIBUTE_PCI_BUS_ID] = bus
		d.Attributes[cu.DEVICE_ATTRIBUTE_PCI_DEVICE_ID] = 0
		d.Attributes[cu.DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID] = 0
		c.Devices = append(c.Devices, d)
	}
	return c
}

// PresetMNNVL is one compute tray of a multi-node NVLink system (GB200 NVL72 style): four
// Blackwell GPUs with IMEX channels, so fabric handles work, and multicast. Its attribute
// values are modelled on the H200's and not recorded from such a machine.
func PresetMNNVL() Config {
	c := Config{Name: "mnnvl", DriverVersion: 13000, IMEX: true,
		MulticastGranularity: 2 * mib, MulticastRecommendedGranularity: 2 * mib, HostNUMANodes: 2}
	for i := 0; i < 4; i++ {
		d := hopper("NVIDIA GB200", 189471*mib, h100Attributes, h200Diff)
		d.ComputeMajor, d.ComputeMinor = 10, 0
		d.Multicast = true
		d.UUID = uuid(0x4d4e4e56, i)
		d.PCIBusID = "0008:0" + string(rune('1'+i)) + ":00.0"
		d.Attributes[cu.DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] = 8
		d.Attributes[cu.DEVICE_ATTRIBUTE_PCI_BUS_ID] = 1 + i
		d.Attributes[cu.DEVICE_ATTRIBUTE_PCI_DEVICE_ID] = 0
		c.Devices = append(c.Devices, d)
	}
	return c
}

// PresetOldGPU is a Kepler Tesla K80 (one of its two GPUs) on a CUDA 11.4 driver: no virtual
// memory management, so every VMM call returns CUDA_ERROR_NOT_SUPPORTED.
func PresetOldGPU() Config {
	d := Device{
		Name: "Tesla K80", UUID: uuid(0x4b383020, 0), PCIBusID: "0000:04:00.0",
		TotalMem: 11441 * mib, ComputeMajor: 3, ComputeMinor: 7,
		Granularity: 2 * mib, RecommendedGranularity: 2 * mib,
		Attributes: map[cu.DeviceAttribute]int{
			cu.DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:          1024,
			cu.DEVICE_ATTRIBUTE_WARP_SIZE:                      32,
			cu.DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:           13,
			cu.DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:             1,
			cu.DEVICE_ATTRIBUTE_PCI_BUS_ID:                     4,
			cu.DEVICE_ATTRIBUTE_ECC_ENABLED:                    1,
			cu.DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:                1,
			cu.DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:             1,
			cu.DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:            1,
			cu.DEVICE_ATTRIBUTE_MANAGED_MEMORY:                 1,
			cu.DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: 2048,
		},
	}
	return Config{Name: "oldgpu", DriverVersion: 11040, Devices: []Device{d}}
}

// PresetWorkstation is a workstation with one NVIDIA RTX A6000: VMM and POSIX descriptors,
// no fabric handles, no multicast, no host-located VMM memory. Its capabilities are modelled
// (generic compression, no GPUDirect RDMA with VMM), not recorded.
func PresetWorkstation() Config {
	d := Device{
		Name: "NVIDIA RTX A6000", UUID: uuid(0x41363030, 0), PCIBusID: "0000:01:00.0",
		TotalMem: 48676 * mib, ComputeMajor: 8, ComputeMinor: 6,
		Granularity: 2 * mib, RecommendedGranularity: 2 * mib,
		VMM: true, POSIXFD: true, Compression: true,
		Attributes: map[cu.DeviceAttribute]int{
			cu.DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:          1024,
			cu.DEVICE_ATTRIBUTE_WARP_SIZE:                      32,
			cu.DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:           84,
			cu.DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:             1,
			cu.DEVICE_ATTRIBUTE_PCI_BUS_ID:                     1,
			cu.DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:             1,
			cu.DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:            1,
			cu.DEVICE_ATTRIBUTE_MANAGED_MEMORY:                 1,
			cu.DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:         1,
			cu.DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: 1536,
			cu.DEVICE_ATTRIBUTE_L2_CACHE_SIZE:                  6 << 20,
			cu.DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:        384,
		},
	}
	return Config{Name: "workstation", DriverVersion: 13000, Devices: []Device{d}}
}

// The presets below are nodes broken in the ways GPU fleets keep breaking, each one way,
// so that a preflight (cmd/vmmprobe, which describes the node around the GPUs for each
// preset) can show its diagnosis and remedy for each without such a node.

// PresetHGX8FabricManagerDown is PresetHGX8 with nvidia-fabricmanager not running: cuInit
// (New) fails with CUDA_ERROR_SYSTEM_NOT_READY. PyTorch's H100 CI ran like this for 2000+
// commits (pytorch/ci-infra#541).
func PresetHGX8FabricManagerDown() Config {
	c := PresetHGX8()
	c.Name = "hgx8-fm-down"
	c.FabricManagerDown = true
	return c
}

// PresetHGX8Degraded is PresetHGX8 whose fabric is up but degraded: device 5 has 2 of its
// 18 NVLinks down. CUDA works as on PresetHGX8; collectives over NVLink run slower than the
// node is sold for, which only NVML tells.
func PresetHGX8Degraded() Config {
	c := PresetHGX8()
	c.Name = "hgx8-degraded"
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
// into the container, say): CUDA works as on PresetH200, and nothing NVML would tell is
// known.
func PresetH200NoNVML() Config {
	c := PresetH200()
	c.Name = "h200-no-nvml"
	return c
}
