package cu

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The C layouts, from cuda.h 13.0 on LP64/LLP64 (every platform cuvmm ships for).
func TestStructLayouts(t *testing.T) {
	var p MemAllocationProp
	require.EqualValues(t, 32, unsafe.Sizeof(p), "CUmemAllocationProp")
	require.EqualValues(t, 0, unsafe.Offsetof(p.Type))
	require.EqualValues(t, 4, unsafe.Offsetof(p.RequestedHandleTypes))
	require.EqualValues(t, 8, unsafe.Offsetof(p.Location))
	require.EqualValues(t, 16, unsafe.Offsetof(p.Win32HandleMetaData))
	require.EqualValues(t, 24, unsafe.Offsetof(p.CompressionType))
	require.EqualValues(t, 25, unsafe.Offsetof(p.GPUDirectRDMACapable))
	require.EqualValues(t, 26, unsafe.Offsetof(p.Usage))
	require.EqualValues(t, 28, unsafe.Offsetof(p.Reserved))

	var l MemLocation
	require.EqualValues(t, 8, unsafe.Sizeof(l), "CUmemLocation")
	require.EqualValues(t, 4, unsafe.Offsetof(l.ID))

	var a MemAccessDesc
	require.EqualValues(t, 12, unsafe.Sizeof(a), "CUmemAccessDesc")
	require.EqualValues(t, 8, unsafe.Offsetof(a.Flags))
	require.EqualValues(t, 24, unsafe.Sizeof([2]MemAccessDesc{}), "arrays of CUmemAccessDesc are packed at 12 bytes")

	var m MulticastObjectProp
	require.EqualValues(t, 32, unsafe.Sizeof(m), "CUmulticastObjectProp")
	require.EqualValues(t, 8, unsafe.Offsetof(m.Size))
	require.EqualValues(t, 16, unsafe.Offsetof(m.HandleTypes))
	require.EqualValues(t, 24, unsafe.Offsetof(m.Flags))

	require.EqualValues(t, 64, unsafe.Sizeof(MemFabricHandle{}), "CUmemFabricHandle")
	require.EqualValues(t, 16, unsafe.Sizeof(UUID{}), "CUuuid")
}
