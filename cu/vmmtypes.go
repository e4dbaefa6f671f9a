package cu

import "fmt"

// MemHandle is a CUmemGenericAllocationHandle: physical memory or a multicast object.
// Only values returned by this package are accepted by it (see the package doc).
type MemHandle uint64

func (h MemHandle) String() string { return fmt.Sprintf("handle %#x", uint64(h)) }

// The enums of the VMM calls and their constants are generated from cuda.h into
// zvmmtypes.go (the //cu:enum lines of prototypes.go); the structs are laid out here by
// hand, and layout_test.go checks them against cuda.h's.

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
