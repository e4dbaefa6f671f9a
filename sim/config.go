package sim

import (
	"cmp"
	"fmt"
	"maps"

	"github.com/cuvmm/cuvmm/cu"
)

// Config describes a simulated machine: its driver, its devices and how they are linked.
// Start from a preset (PresetH200 and friends) and change what you need, or build one.
type Config struct {
	// Name labels the machine in messages; presets use their own name.
	Name string
	// DriverVersion is what DriverVersion reports (13000 for CUDA 13.0).
	DriverVersion int
	// Devices are the GPUs, by ordinal.
	Devices []Device
	// PeerAccess[i][j] says whether device i can access memory of device j. Nil means every
	// pair of distinct devices can; a device never reports peer access to itself.
	PeerAccess [][]bool
	// IMEX says whether the process has an IMEX channel (/dev/nvidia-caps-imex-channels):
	// without one, fabric handles cannot be created or imported.
	IMEX bool
	// FabricManagerDown says the GPUs' NVLinks go through NVSwitches of this host and
	// nvidia-fabricmanager is not running, so the GPUs have not joined the fabric: New then
	// fails as cuInit does there, with CUDA_ERROR_SYSTEM_NOT_READY (the "Error 802: system
	// not yet initialized" that PyTorch and others report on HGX nodes whose
	// nvidia-fabricmanager is down).
	FabricManagerDown bool
	// MulticastGranularity and MulticastRecommendedGranularity are what
	// cuMulticastGetGranularity reports (2 MiB and 2 MiB, as two H200s of one host reported with driver 580).
	MulticastGranularity, MulticastRecommendedGranularity uint64
	// HostNUMANodes is the number of host NUMA nodes allocations may be placed on
	// (MEM_LOCATION_TYPE_HOST_NUMA IDs 0 to HostNUMANodes-1); 0 means 1.
	HostNUMANodes int
	// HostCapacity caps host-located allocations (0: unlimited).
	HostCapacity uint64
	// VABase and VASize bound the virtual addresses reservations are placed in. Zero values
	// give the defaults: a base of 0x302000000 (the first address the real driver hands out)
	// and 127 TiB, so a 64 TiB reservation succeeds and a 128 TiB one fails as on Hopper.
	VABase, VASize uint64
	// RefuseHints makes cuMemAddressReserve never place a reservation at the address asked
	// for. The real driver sometimes does not (an H200 refused hints at free, adjacent
	// ranges), so code that extends a reservation with the hint must cope; this lets its
	// tests take that path every time.
	RefuseHints bool
	// PlacementAlign is the largest alignment a reservation gets from its size: the driver
	// aligns each reservation to the largest power of two not above its size, up to this
	// (32 MiB on an H200, driver 580, recorded: vmmtest placement/second-1GiB and
	// placement/64MiB-after-16MiB; 0 means that). A 1 GiB reservation made after a 2 MiB one
	// in a fresh address space therefore starts at the next 32 MiB boundary (seen on one
	// H200; where the process already has holes, first fit may put it elsewhere).
	PlacementAlign uint64
}

// Device describes one simulated GPU.
type Device struct {
	Name                       string
	UUID                       cu.UUID
	PCIBusID                   string // domain:bus:device.function, e.g. "0000:18:00.0"
	TotalMem                   uint64 // bytes; also the capacity for cuMemCreate
	ComputeMajor, ComputeMinor int
	// Granularity and RecommendedGranularity are cuMemGetAllocationGranularity's answers
	// (2 MiB each on Hopper).
	Granularity, RecommendedGranularity uint64

	// Capabilities. Each also sets the matching device attribute.
	VMM           bool // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: without it VMM calls fail NOT_SUPPORTED
	POSIXFD       bool // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
	Win32         bool // HANDLE_TYPE_WIN32_HANDLE_SUPPORTED
	Win32KMT      bool // HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED
	Fabric        bool // HANDLE_TYPE_FABRIC_SUPPORTED (creating one also needs Config.IMEX)
	Multicast     bool // MULTICAST_SUPPORTED
	Compression   bool // GENERIC_COMPRESSION_SUPPORTED
	GPUDirectRDMA bool // GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
	HostVMM       bool // HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: host-located cuMemCreate
	HostNUMAVMM   bool // HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED

	// DmaBufPCIe lets dma-buf exports ask for a mapping through PCIe BAR1
	// (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE); without it they fail
	// CUDA_ERROR_NOT_SUPPORTED, as on the x86 H100 and H200 machines (recorded: dmabuf/pcie).
	// No device attribute tells it, and no preset sets it: the flag is for platforms where a
	// NIC could reach GPU memory another way (a coherent CPU-GPU link), none of them recorded.
	DmaBufPCIe bool

	// Attributes holds every other attribute; those not present read 0. The fields above
	// take precedence over entries for the same attributes.
	Attributes map[cu.DeviceAttribute]int
}

// clone returns a deep copy, so a Sim never shares maps or slices with its caller.
func (c Config) clone() Config {
	d := c
	d.Devices = make([]Device, len(c.Devices))
	for i, dv := range c.Devices {
		dv.Attributes = maps.Clone(dv.Attributes)
		d.Devices[i] = dv
	}
	if c.PeerAccess != nil {
		d.PeerAccess = make([][]bool, len(c.PeerAccess))
		for i, row := range c.PeerAccess {
			d.PeerAccess[i] = append([]bool(nil), row...)
		}
	}
	return d
}

func isPow2(x uint64) bool { return x != 0 && x&(x-1) == 0 }

// validate fills defaults and rejects configurations sim cannot model.
func (c *Config) validate() error {
	if len(c.Devices) > 1024 {
		return fmt.Errorf("sim: config %q: %d devices (at most 1024)", c.Name, len(c.Devices))
	}
	c.VABase = cmp.Or(c.VABase, 0x302000000)
	c.VASize = cmp.Or(c.VASize, 127<<40)
	if c.VABase+c.VASize < c.VABase || c.VABase%(2<<20) != 0 {
		return fmt.Errorf("sim: config %q: VA range %#x+%#x is not 2 MiB aligned or overflows", c.Name, c.VABase, c.VASize)
	}
	c.HostNUMANodes = max(c.HostNUMANodes, 1)
	c.PlacementAlign = cmp.Or(c.PlacementAlign, 32<<20)
	if !isPow2(c.PlacementAlign) {
		return fmt.Errorf("sim: config %q: placement alignment %d is not a power of two", c.Name, c.PlacementAlign)
	}
	c.MulticastGranularity = cmp.Or(c.MulticastGranularity, 2<<20)
	c.MulticastRecommendedGranularity = cmp.Or(c.MulticastRecommendedGranularity, 2<<20)
	if !isPow2(c.MulticastGranularity) || c.MulticastRecommendedGranularity%c.MulticastGranularity != 0 {
		return fmt.Errorf("sim: config %q: multicast granularity %d/%d", c.Name, c.MulticastGranularity, c.MulticastRecommendedGranularity)
	}
	for i := range c.Devices {
		d := &c.Devices[i]
		d.Granularity = cmp.Or(d.Granularity, 2<<20)
		d.RecommendedGranularity = cmp.Or(d.RecommendedGranularity, d.Granularity)
		if !isPow2(d.Granularity) || d.RecommendedGranularity%d.Granularity != 0 || d.Granularity < 4096 {
			return fmt.Errorf("sim: config %q: device %d granularity %d/%d", c.Name, i, d.Granularity, d.RecommendedGranularity)
		}
		if d.Attributes == nil {
			d.Attributes = map[cu.DeviceAttribute]int{}
		}
	}
	if c.PeerAccess != nil {
		if len(c.PeerAccess) != len(c.Devices) {
			return fmt.Errorf("sim: config %q: PeerAccess has %d rows for %d devices", c.Name, len(c.PeerAccess), len(c.Devices))
		}
		for i, row := range c.PeerAccess {
			if len(row) != len(c.Devices) {
				return fmt.Errorf("sim: config %q: PeerAccess row %d has %d entries", c.Name, i, len(row))
			}
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// attribute returns the value of a for the device, with the typed fields taking precedence.
func (d *Device) attribute(a cu.DeviceAttribute) int {
	switch a {
	case cu.DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		return d.ComputeMajor
	case cu.DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		return d.ComputeMinor
	case cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		return b2i(d.VMM)
	case cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
		return b2i(d.POSIXFD)
	case cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
		return b2i(d.Win32)
	case cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
		return b2i(d.Win32KMT)
	case cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
		return b2i(d.Fabric)
	case cu.DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
		return b2i(d.Multicast)
	case cu.DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
		return b2i(d.Compression)
	case cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
		return b2i(d.GPUDirectRDMA)
	case cu.DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		return b2i(d.HostVMM)
	case cu.DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		return b2i(d.HostNUMAVMM)
	}
	return d.Attributes[a]
}
