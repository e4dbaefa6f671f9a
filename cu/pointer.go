package cu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

// Pointer attributes: what the driver knows of an address (cuPointerGetAttributes). Unlike
// cuPointerGetAttribute, the plural call does not fail on an address the driver does not
// know: it reports the attributes' null values (MemoryType 0) and CUDA_SUCCESS. It needs a
// current context, so it runs through one: ACCESS_FLAGS is the access of that context's
// device.

// maxPointerAttributes bounds one PointerGetAttributes call: cuda.h 13.0 has 21 attributes.
const maxPointerAttributes = 32

// pointerQuery is the memory of one cuPointerGetAttributes call, in one heap object: the
// attributes asked for, the array of pointers to where the driver writes each value, and
// the values, one 8-byte slot each. The call keeps it alive (the generated function passes
// its unsafe.Pointer arguments through callKeep, which also makes it escape to the heap, so
// the addresses in data stay valid).
type pointerQuery struct {
	attrs [maxPointerAttributes]PointerAttribute
	data  [maxPointerAttributes]uintptr // &vals[i]
	vals  [maxPointerAttributes]uint64
}

// PointerGetAttributes asks the driver for the attributes attrs of the address ptr
// (cuPointerGetAttributes) and stores each in values[i], which must be as long as attrs.
// Each value is the driver's 8-byte slot for it, zeroed before the call: the driver writes
// 4 bytes of the 4-byte attributes (MEMORY_TYPE, DEVICE_ORDINAL, the booleans, ACCESS_FLAGS,
// ALLOWED_HANDLE_TYPES), so those read as their uint32 (a negative ordinal as its two's
// complement), and 8 of the others (addresses, sizes, ids, handles). P2P_TOKENS, 16 bytes,
// cannot be asked for. cuvmm's platforms are all little-endian, which this relies on.
//
// An address the driver does not know reads as all zeros, with no error. The call allocates.
func (c *Context) PointerGetAttributes(ptr DevicePtr, attrs []PointerAttribute, values []uint64) error {
	switch {
	case len(attrs) == 0 || len(attrs) > maxPointerAttributes:
		return wrap(invalidArg(fmt.Sprintf("%d attributes (1 to %d)", len(attrs), maxPointerAttributes)), "cuPointerGetAttributes", "%v", ptr)
	case len(values) != len(attrs):
		return wrap(invalidArg(fmt.Sprintf("%d values for %d attributes", len(values), len(attrs))), "cuPointerGetAttributes", "%v", ptr)
	case slices.Contains(attrs, POINTER_ATTRIBUTE_P2P_TOKENS):
		return wrap(invalidArg("P2P_TOKENS is 16 bytes, more than a value holds"), "cuPointerGetAttributes", "%v", ptr)
	}
	q := new(pointerQuery)
	n := copy(q.attrs[:], attrs)
	for i := range n {
		q.data[i] = uintptr(unsafe.Pointer(&q.vals[i]))
	}
	err := c.Do(func() error {
		if err := cuPointerGetAttributes(uint32(n), unsafe.Pointer(&q.attrs), unsafe.Pointer(&q.data), ptr); err != nil {
			return wrap(err, "cuPointerGetAttributes", "%v, %v", ptr, attrs)
		}
		return nil
	})
	copy(values, q.vals[:n])
	return err
}

// The device ordinals the driver reports where no device is meant (CU_DEVICE_CPU and
// CU_DEVICE_INVALID, #defines of cuda.h).
const (
	DEVICE_CPU     = -1
	DEVICE_INVALID = -2
)

// PointerAttributes is what the driver reports of one address, the attributes of
// cuPointerGetAttributes that apply to device memory. For an address that maps no memory
// MemoryType is 0, DeviceOrdinal is DEVICE_INVALID, and every other field is zero except
// RangeStart and RangeSize, which are the reservation when the address lies in one
// (recorded: vmmtest pointer/reservation-start-unmapped, pointer/freed-reservation).
type PointerAttributes struct {
	MemoryType    MemoryType // MEMORY_TYPE: MEMORYTYPE_DEVICE, MEMORYTYPE_HOST; 0 for an address that maps no memory
	DeviceOrdinal int        // DEVICE_ORDINAL: the device the memory was allocated on or registered with; DEVICE_INVALID for none
	Managed       bool       // IS_MANAGED
	// Mapped says the address lies in a range mapped to memory (MAPPED).
	Mapped bool
	// RangeStart and RangeSize are the address range the address lies in (RANGE_START_ADDR,
	// RANGE_SIZE): for VMM memory the reservation, not the mapping.
	RangeStart DevicePtr
	RangeSize  uint64
	// MappingBase and MappingSize are the mapping the address belongs to (MAPPING_BASE_ADDR,
	// MAPPING_SIZE).
	MappingBase DevicePtr
	MappingSize uint64
	// HandleTypes are the shareable handle types the allocation may be exported as
	// (ALLOWED_HANDLE_TYPES).
	HandleTypes MemHandleType
	// GPUDirectRDMA says third-party devices (a NIC) can use the memory through GPUDirect
	// RDMA (IS_GPU_DIRECT_RDMA_CAPABLE).
	GPUDirectRDMA bool
	// Access is the access the device of the context asked from has (ACCESS_FLAGS).
	Access PointerAccessFlags
	// LegacyIPC says cudaIpcGetMemHandle can share the allocation
	// (IS_LEGACY_CUDA_IPC_CAPABLE): memory of cuMemAlloc, not of VMM.
	LegacyIPC bool
	// Mempool is the CUmemoryPool the memory came from, 0 for none (MEMPOOL_HANDLE).
	Mempool uintptr
	// BufferID is a process-wide unique id of the allocated region (BUFFER_ID), and
	// MemoryBlockID one of the physical allocation (MEMORY_BLOCK_ID).
	BufferID, MemoryBlockID uint64
	// HWDecompress says the memory can be used for hardware decompression
	// (IS_HW_DECOMPRESS_CAPABLE).
	HWDecompress bool
	// Refused lists the attributes this driver would not report for the address: it
	// refused them in one call (CUDA_ERROR_INVALID_VALUE or NOT_SUPPORTED), and each alone
	// too. Their fields are zero. Empty when the one call answered everything.
	Refused []PointerAttribute
}

// PointerAttributeSet lists the attributes PointerAttributes asks for: every one cuda.h 13.0
// has except those that do not apply to device memory of the VMM API (CONTEXT, which such
// memory does not belong to; DEVICE_POINTER and HOST_POINTER, which differ from the address
// only for registered host memory; P2P_TOKENS, for cuMemAlloc memory, which sets
// SYNC_MEMOPS as a side effect; SYNC_MEMOPS).
func PointerAttributeSet() []PointerAttribute { return pointerAttrs[:] }

var pointerAttrs = [...]PointerAttribute{
	POINTER_ATTRIBUTE_MEMORY_TYPE,
	POINTER_ATTRIBUTE_DEVICE_ORDINAL,
	POINTER_ATTRIBUTE_IS_MANAGED,
	POINTER_ATTRIBUTE_MAPPED,
	POINTER_ATTRIBUTE_RANGE_START_ADDR,
	POINTER_ATTRIBUTE_RANGE_SIZE,
	POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
	POINTER_ATTRIBUTE_MAPPING_SIZE,
	POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
	POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE,
	POINTER_ATTRIBUTE_ACCESS_FLAGS,
	POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
	POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
	POINTER_ATTRIBUTE_BUFFER_ID,
	POINTER_ATTRIBUTE_MEMORY_BLOCK_ID,
	POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE,
}

// PointerAttributes reports the attributes of PointerAttributeSet for ptr, asked from c (so
// Access is c's device's). It asks for them in one call; if the driver refuses that one
// with CUDA_ERROR_INVALID_VALUE or NOT_SUPPORTED (the header documents only some of the
// attributes for the plural call), it asks for each alone and lists those it refuses again
// in Refused, failing only if it refuses them all.
func (c *Context) PointerAttributes(ptr DevicePtr) (PointerAttributes, error) {
	var vals [len(pointerAttrs)]uint64
	err := c.PointerGetAttributes(ptr, pointerAttrs[:], vals[:])
	var refused []PointerAttribute
	if refusal(err) {
		for i, a := range pointerAttrs {
			e := c.PointerGetAttributes(ptr, pointerAttrs[i:i+1], vals[i:i+1])
			switch {
			case refusal(e):
				refused = append(refused, a)
				vals[i] = 0
			case e != nil:
				return PointerAttributes{}, e
			}
		}
		if len(refused) == len(pointerAttrs) {
			return PointerAttributes{}, err
		}
	} else if err != nil {
		return PointerAttributes{}, err
	}
	p := DecodePointerAttributes(pointerAttrs[:], vals[:])
	p.Refused = refused
	return p, nil
}

func refusal(err error) bool {
	return errors.Is(err, ERROR_INVALID_VALUE) || errors.Is(err, ERROR_NOT_SUPPORTED)
}

// DecodePointerAttributes fills a PointerAttributes from the values PointerGetAttributes
// returned for attrs; attributes it has no field for are ignored.
func DecodePointerAttributes(attrs []PointerAttribute, values []uint64) PointerAttributes {
	var p PointerAttributes
	for i, a := range attrs {
		if i >= len(values) {
			break
		}
		v := values[i]
		switch a {
		case POINTER_ATTRIBUTE_MEMORY_TYPE:
			p.MemoryType = MemoryType(uint32(v))
		case POINTER_ATTRIBUTE_DEVICE_ORDINAL:
			p.DeviceOrdinal = int(int32(uint32(v)))
		case POINTER_ATTRIBUTE_IS_MANAGED:
			p.Managed = v != 0
		case POINTER_ATTRIBUTE_MAPPED:
			p.Mapped = v != 0
		case POINTER_ATTRIBUTE_RANGE_START_ADDR:
			p.RangeStart = DevicePtr(v)
		case POINTER_ATTRIBUTE_RANGE_SIZE:
			p.RangeSize = v
		case POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
			p.MappingBase = DevicePtr(v)
		case POINTER_ATTRIBUTE_MAPPING_SIZE:
			p.MappingSize = v
		case POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
			p.HandleTypes = MemHandleType(uint32(v))
		case POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
			p.GPUDirectRDMA = v != 0
		case POINTER_ATTRIBUTE_ACCESS_FLAGS:
			p.Access = PointerAccessFlags(uint32(v))
		case POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
			p.LegacyIPC = v != 0
		case POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
			p.Mempool = uintptr(v)
		case POINTER_ATTRIBUTE_BUFFER_ID:
			p.BufferID = v
		case POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
			p.MemoryBlockID = v
		case POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
			p.HWDecompress = v != 0
		}
	}
	return p
}

// String names the memory type: "device", "host", "array", "unified", or "none" for 0 (an
// address the driver does not know).
func (t MemoryType) String() string { return enumName(t, memoryTypeNames[:], "CUmemorytype") }

var memoryTypeNames = [...]string{
	0:                  "none",
	MEMORYTYPE_HOST:    "host",
	MEMORYTYPE_DEVICE:  "device",
	MEMORYTYPE_ARRAY:   "array",
	MEMORYTYPE_UNIFIED: "unified",
}

// String names the access: "none", "read", "readwrite".
func (a PointerAccessFlags) String() string {
	return enumName(a, accessFlagNames[:], "CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS")
}

var accessFlagNames = [...]string{
	POINTER_ATTRIBUTE_ACCESS_FLAG_NONE:      "none",
	POINTER_ATTRIBUTE_ACCESS_FLAG_READ:      "read",
	POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE: "readwrite",
}

// String names the attribute as cuda.h does, less "CU_POINTER_ATTRIBUTE_".
func (a PointerAttribute) String() string {
	return enumName(a, pointerAttributeNames[:], "CUpointer_attribute")
}

// enumName returns the name of v in names, or "unknown(v)" for a value without one.
func enumName[T ~int32](v T, names []string, unknown string) string {
	if v >= 0 && int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", unknown, int32(v))
}

var pointerAttributeNames = [...]string{
	POINTER_ATTRIBUTE_CONTEXT:                    "CONTEXT",
	POINTER_ATTRIBUTE_MEMORY_TYPE:                "MEMORY_TYPE",
	POINTER_ATTRIBUTE_DEVICE_POINTER:             "DEVICE_POINTER",
	POINTER_ATTRIBUTE_HOST_POINTER:               "HOST_POINTER",
	POINTER_ATTRIBUTE_P2P_TOKENS:                 "P2P_TOKENS",
	POINTER_ATTRIBUTE_SYNC_MEMOPS:                "SYNC_MEMOPS",
	POINTER_ATTRIBUTE_BUFFER_ID:                  "BUFFER_ID",
	POINTER_ATTRIBUTE_IS_MANAGED:                 "IS_MANAGED",
	POINTER_ATTRIBUTE_DEVICE_ORDINAL:             "DEVICE_ORDINAL",
	POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: "IS_LEGACY_CUDA_IPC_CAPABLE",
	POINTER_ATTRIBUTE_RANGE_START_ADDR:           "RANGE_START_ADDR",
	POINTER_ATTRIBUTE_RANGE_SIZE:                 "RANGE_SIZE",
	POINTER_ATTRIBUTE_MAPPED:                     "MAPPED",
	POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:       "ALLOWED_HANDLE_TYPES",
	POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: "IS_GPU_DIRECT_RDMA_CAPABLE",
	POINTER_ATTRIBUTE_ACCESS_FLAGS:               "ACCESS_FLAGS",
	POINTER_ATTRIBUTE_MEMPOOL_HANDLE:             "MEMPOOL_HANDLE",
	POINTER_ATTRIBUTE_MAPPING_SIZE:               "MAPPING_SIZE",
	POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:          "MAPPING_BASE_ADDR",
	POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:            "MEMORY_BLOCK_ID",
	POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:   "IS_HW_DECOMPRESS_CAPABLE",
}

// String describes the attributes on one line, for logs and messages.
func (p PointerAttributes) String() string {
	if p.MemoryType == 0 && !p.Mapped && len(p.Refused) == 0 {
		if p.RangeSize != 0 {
			return fmt.Sprintf("not mapped, in reserved range %v+%#x", p.RangeStart, p.RangeSize)
		}
		return "unknown to the driver"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v memory of device %d", p.MemoryType, p.DeviceOrdinal)
	if p.Mapped {
		fmt.Fprintf(&b, ", mapped at %v+%#x", p.MappingBase, p.MappingSize)
	} else {
		b.WriteString(", not mapped")
	}
	fmt.Fprintf(&b, " in range %v+%#x, handle types %#x, access %v", p.RangeStart, p.RangeSize, uint32(p.HandleTypes), p.Access)
	for _, f := range []struct {
		on   bool
		name string
	}{{p.Managed, "managed"}, {p.GPUDirectRDMA, "GPUDirect RDMA"}, {p.LegacyIPC, "legacy IPC"}, {p.Mempool != 0, "from a pool"}, {p.HWDecompress, "HW decompress"}} {
		if f.on {
			b.WriteString(", " + f.name)
		}
	}
	if len(p.Refused) > 0 {
		fmt.Fprintf(&b, ", refused %v", p.Refused)
	}
	return b.String()
}
