package cu

import (
	"errors"
	"slices"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/stretchr/testify/require"
)

func TestDecodePointerAttributes(t *testing.T) {
	attrs := PointerAttributeSet()
	vals := make([]uint64, len(attrs))
	set := func(a PointerAttribute, v uint64) { vals[slices.Index(attrs, a)] = v }
	set(POINTER_ATTRIBUTE_MEMORY_TYPE, uint64(MEMORYTYPE_DEVICE))
	set(POINTER_ATTRIBUTE_DEVICE_ORDINAL, 0xfffffffe) // the driver wrote 4 bytes of an int -2
	set(POINTER_ATTRIBUTE_MAPPED, 1)
	set(POINTER_ATTRIBUTE_RANGE_START_ADDR, 0x302000000)
	set(POINTER_ATTRIBUTE_RANGE_SIZE, 64<<20)
	set(POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, 0x302200000)
	set(POINTER_ATTRIBUTE_MAPPING_SIZE, 2<<20)
	set(POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, uint64(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR|MEM_HANDLE_TYPE_FABRIC))
	set(POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, 1)
	set(POINTER_ATTRIBUTE_ACCESS_FLAGS, uint64(POINTER_ATTRIBUTE_ACCESS_FLAG_READ))
	set(POINTER_ATTRIBUTE_BUFFER_ID, 7)
	set(POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, 9)
	p := DecodePointerAttributes(attrs, vals)
	require.Equal(t, PointerAttributes{
		MemoryType: MEMORYTYPE_DEVICE, DeviceOrdinal: -2, Mapped: true,
		RangeStart: 0x302000000, RangeSize: 64 << 20, MappingBase: 0x302200000, MappingSize: 2 << 20,
		HandleTypes: MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | MEM_HANDLE_TYPE_FABRIC, GPUDirectRDMA: true,
		Access: POINTER_ATTRIBUTE_ACCESS_FLAG_READ, BufferID: 7, MemoryBlockID: 9,
	}, p)
	require.Equal(t, "device memory of device -2, mapped at 0x302200000+0x200000 in range 0x302000000+0x4000000, handle types 0x9, access read, GPUDirect RDMA", p.String())
	require.Equal(t, "unknown to the driver", DecodePointerAttributes(attrs, make([]uint64, len(attrs))).String())
	// Fewer values than attributes: the rest stay zero.
	require.Equal(t, MEMORYTYPE_HOST, DecodePointerAttributes([]PointerAttribute{POINTER_ATTRIBUTE_MEMORY_TYPE, POINTER_ATTRIBUTE_MAPPED}, []uint64{1}).MemoryType)
}

func TestPointerAttributeSet(t *testing.T) {
	set := PointerAttributeSet()
	require.Len(t, set, 16)
	for _, a := range []PointerAttribute{POINTER_ATTRIBUTE_CONTEXT, POINTER_ATTRIBUTE_DEVICE_POINTER, POINTER_ATTRIBUTE_HOST_POINTER, POINTER_ATTRIBUTE_P2P_TOKENS, POINTER_ATTRIBUTE_SYNC_MEMOPS} {
		require.NotContains(t, set, a, a.String())
	}
	for a := POINTER_ATTRIBUTE_CONTEXT; a <= POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE; a++ {
		require.NotContains(t, a.String(), "(", "every attribute of the header has a name")
	}
	require.Equal(t, "CUpointer_attribute(99)", PointerAttribute(99).String())
	require.Equal(t, "readwrite", POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE.String())
	require.Equal(t, "none", MemoryType(0).String())
}

// The checks made before the driver is called need no driver (and no context).
func TestPointerGetAttributesArguments(t *testing.T) {
	var c *Context
	one := []PointerAttribute{POINTER_ATTRIBUTE_MAPPED}
	for name, err := range map[string]error{
		"no attributes":  c.PointerGetAttributes(0x1000, nil, nil),
		"too many":       c.PointerGetAttributes(0x1000, make([]PointerAttribute, 33), make([]uint64, 33)),
		"values too few": c.PointerGetAttributes(0x1000, one, nil),
		"p2p tokens":     c.PointerGetAttributes(0x1000, []PointerAttribute{POINTER_ATTRIBUTE_P2P_TOKENS}, make([]uint64, 1)),
	} {
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		require.Contains(t, err.Error(), "cuPointerGetAttributes", name)
	}
	require.ErrorIs(t, c.PointerGetAttributes(0x1000, one, make([]uint64, 1)), ErrContextReleased)
	_, err := c.PointerAttributes(0x1000)
	require.ErrorIs(t, err, ErrContextReleased)
}

func TestOptionalSymbols(t *testing.T) {
	var optional []string
	for _, p := range Symbols() {
		if s := p.Symbol(); OptionalSymbol(s.Name) {
			optional = append(optional, s.Name)
			require.GreaterOrEqual(t, s.Version, 13010, "%s is optional: newer than the 13.0 header", s.Name)
		}
	}
	require.Equal(t, []string{"cuMulticastBindMem_v2", "cuMulticastBindAddr_v2"}, optional)
	require.False(t, OptionalSymbol("cuMulticastBindMem"))
}

// The CUDA 13.1 binds look for their symbol before anything else: without a driver (or on
// one without them) that is the error, whatever the handles.
func TestMulticastBindV2SymbolFirst(t *testing.T) {
	if Init() == nil {
		t.Skip("a driver is loaded: the GPU tests cover it (TestGPUMulticastBindV2)")
	}
	bogus := MemHandle(0xdeadbeef)
	for name, err := range map[string]error{
		"mem":  MulticastBindMemV2(bogus, 0, 0, bogus, 0, 2<<20, 0),
		"addr": MulticastBindAddrV2(bogus, 0, 0, 0x7f0000000000, 2<<20, 0),
	} {
		require.ErrorIs(t, err, loader.ErrNoDriver, name)
		require.False(t, errors.Is(err, ErrUnknownHandle), name)
		require.Contains(t, err.Error(), "_v2", name)
	}
	require.False(t, HasMulticastBindV2())
}
