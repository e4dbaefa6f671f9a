package cu

import "fmt"

// MemHandle is a CUmemGenericAllocationHandle: physical memory or a multicast object.
// Only values returned by this package are accepted by it (see the package doc).
type MemHandle uint64

func (h MemHandle) String() string { return fmt.Sprintf("handle %#x", uint64(h)) }

// MemAllocationType is a CUmemAllocationType.
type MemAllocationType int32

const (
	MEM_ALLOCATION_TYPE_INVALID MemAllocationType = 0x0
	MEM_ALLOCATION_TYPE_PINNED  MemAllocationType = 0x1
	MEM_ALLOCATION_TYPE_MANAGED MemAllocationType = 0x2
)

// MemLocationType is a CUmemLocationType.
type MemLocationType int32

const (
	MEM_LOCATION_TYPE_INVALID           MemLocationType = 0x0
	MEM_LOCATION_TYPE_DEVICE            MemLocationType = 0x1
	MEM_LOCATION_TYPE_HOST              MemLocationType = 0x2
	MEM_LOCATION_TYPE_HOST_NUMA         MemLocationType = 0x3
	MEM_LOCATION_TYPE_HOST_NUMA_CURRENT MemLocationType = 0x4
)

// MemHandleType is a CUmemAllocationHandleType: a bit set of shareable handle kinds.
type MemHandleType int32

const (
	MEM_HANDLE_TYPE_NONE                  MemHandleType = 0x0
	MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR MemHandleType = 0x1
	MEM_HANDLE_TYPE_WIN32                 MemHandleType = 0x2
	MEM_HANDLE_TYPE_WIN32_KMT             MemHandleType = 0x4
	MEM_HANDLE_TYPE_FABRIC                MemHandleType = 0x8
)

// MemAccessFlags is a CUmemAccess_flags.
type MemAccessFlags int32

const (
	MEM_ACCESS_FLAGS_PROT_NONE      MemAccessFlags = 0x0
	MEM_ACCESS_FLAGS_PROT_READ      MemAccessFlags = 0x1
	MEM_ACCESS_FLAGS_PROT_READWRITE MemAccessFlags = 0x3
)

// MemAllocationGranularityFlags is a CUmemAllocationGranularity_flags.
type MemAllocationGranularityFlags int32

const (
	MEM_ALLOC_GRANULARITY_MINIMUM     MemAllocationGranularityFlags = 0x0
	MEM_ALLOC_GRANULARITY_RECOMMENDED MemAllocationGranularityFlags = 0x1
)

// MulticastGranularityFlags is a CUmulticastGranularity_flags.
type MulticastGranularityFlags int32

const (
	MULTICAST_GRANULARITY_MINIMUM     MulticastGranularityFlags = 0x0
	MULTICAST_GRANULARITY_RECOMMENDED MulticastGranularityFlags = 0x1
)

// Compression types of MemAllocationProp.CompressionType (CUmemAllocationCompType).
const (
	MEM_ALLOCATION_COMP_NONE    = 0x0
	MEM_ALLOCATION_COMP_GENERIC = 0x1
)

// Usage bits of MemAllocationProp.Usage.
const (
	MEM_CREATE_USAGE_TILE_POOL     = 0x1
	MEM_CREATE_USAGE_HW_DECOMPRESS = 0x2
)

// MemLocation is a CUmemLocation (8 bytes).
type MemLocation struct {
	Type MemLocationType
	ID   int32
}

// String names the location for messages: "device 0", "host", "host NUMA node 1".
func (l MemLocation) String() string {
	switch l.Type {
	case MEM_LOCATION_TYPE_DEVICE:
		return fmt.Sprintf("device %d", l.ID)
	case MEM_LOCATION_TYPE_HOST:
		return "host"
	case MEM_LOCATION_TYPE_HOST_NUMA:
		return fmt.Sprintf("host NUMA node %d", l.ID)
	case MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
		return "host NUMA current"
	}
	return fmt.Sprintf("location type %d id %d", l.Type, l.ID)
}

// MemAccessDesc is a CUmemAccessDesc (12 bytes).
type MemAccessDesc struct {
	Location MemLocation
	Flags    MemAccessFlags
}

// MemAllocationProp is a CUmemAllocationProp (32 bytes). The C struct's allocFlags
// sub-struct is flattened into CompressionType through Reserved.
type MemAllocationProp struct {
	Type                 MemAllocationType
	RequestedHandleTypes MemHandleType
	Location             MemLocation
	Win32HandleMetaData  uintptr // POBJECT_ATTRIBUTES for MEM_HANDLE_TYPE_WIN32; zero otherwise
	CompressionType      uint8
	GPUDirectRDMACapable uint8
	Usage                uint16
	Reserved             [4]uint8
}

// MulticastObjectProp is a CUmulticastObjectProp (32 bytes).
type MulticastObjectProp struct {
	NumDevices  uint32
	_           uint32 // C padding before the size_t
	Size        uint64
	HandleTypes uint64 // MemHandleType bits
	Flags       uint64
}

// MemFabricHandle is a CUmemFabricHandle: 64 opaque bytes naming an allocation across the
// NVLink fabric (IMEX).
type MemFabricHandle [64]byte
