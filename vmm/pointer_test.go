package vmm_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// mapped creates size bytes with props p, maps them at offset off of a reservation of 4*size
// and grants device 0 read-write access.
func mapped(t *testing.T, m *vmm.Manager, p vmm.Props, size, off uint64) (*vmm.Reservation, *vmm.Mapping) {
	t.Helper()
	a, err := m.Create(size, p)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	r, err := m.Reserve(4 * size)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	mp, err := r.Map(off, a)
	require.NoError(t, err)
	require.NoError(t, mp.SetAccess(vmm.ReadWrite(0)...))
	return r, mp
}

func TestPointerDescribesVMMMemory(t *testing.T) {
	m := vmm.New(newSim(t))
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	require.NoError(t, err)
	p := vmm.DeviceProps(0)
	p.GPUDirectRDMA = true
	r, mp := mapped(t, m, p, g, g)

	inner := mp.Addr() + 4096
	ptr, err := m.Pointer(inner)
	require.NoError(t, err)
	require.Equal(t, inner, ptr.Addr)
	require.True(t, ptr.VMM)
	require.True(t, ptr.Mapped)
	require.Equal(t, cu.MEMORYTYPE_DEVICE, ptr.MemoryType)
	require.Equal(t, 0, ptr.DeviceOrdinal)
	require.Equal(t, r.Base(), ptr.RangeStart, "the range is the reservation")
	require.Equal(t, r.Size(), ptr.RangeSize)
	require.Equal(t, mp.Addr(), ptr.MappingBase, "the mapping is the one the address lies in")
	require.Equal(t, g, ptr.MappingSize)
	require.True(t, ptr.GPUDirectRDMA)
	require.Equal(t, cu.POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE, ptr.Access)
	require.Equal(t, vmm.OnDevice(0), ptr.Props.Location)
	require.NotZero(t, ptr.BufferID)
	require.NotZero(t, ptr.MemoryBlockID)

	again, err := m.Pointer(mp.Addr())
	require.NoError(t, err)
	require.Equal(t, ptr.BufferID, again.BufferID, "one mapping, one buffer id")
	require.Equal(t, ptr.MemoryBlockID, again.MemoryBlockID)

	how, why := ptr.Share()
	require.Equal(t, vmm.ShareNone, how)
	require.Contains(t, why, "created without shareable handle types")
	require.Contains(t, ptr.String(), "share: none")

	require.NoError(t, mp.SetAccess(vmm.ReadOnly(0)...))
	ro, err := m.Pointer(inner)
	require.NoError(t, err)
	require.Equal(t, cu.POINTER_ATTRIBUTE_ACCESS_FLAG_READ, ro.Access)
}

func TestPointerShare(t *testing.T) {
	s, err := sim.New(sim.PresetMNNVL())
	require.NoError(t, err)
	m := vmm.New(s)
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	require.NoError(t, err)
	for _, c := range []struct {
		types cu.MemHandleType
		want  vmm.ShareMethod
		why   string
	}{
		{cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, vmm.ShareFD, "POSIX file descriptors"},
		{cu.MEM_HANDLE_TYPE_FABRIC, vmm.ShareFabric, "fabric handles"},
		{cu.MEM_HANDLE_TYPE_FABRIC | cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, vmm.ShareFabric, "POSIX file descriptors too"},
	} {
		p := vmm.DeviceProps(0)
		p.HandleTypes = c.types
		_, mp := mapped(t, m, p, g, 0)
		ptr, err := m.Pointer(mp.Addr())
		require.NoError(t, err)
		require.Equal(t, c.types, ptr.HandleTypes)
		require.Equal(t, c.types, ptr.AllowedHandleTypes())
		how, why := ptr.Share()
		require.Equal(t, c.want, how, "%#x", c.types)
		require.Contains(t, why, c.why)
	}
}

func TestPointerOfOtherDevicesAndAddresses(t *testing.T) {
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	m := vmm.New(s)
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	require.NoError(t, err)
	r, mp := mapped(t, m, vmm.DeviceProps(3), g, 0)

	// Memory of device 3 that device 0 may use: Pointer asks device 3, the owner.
	ptr, err := m.Pointer(mp.Addr())
	require.NoError(t, err)
	require.Equal(t, 3, ptr.DeviceOrdinal)
	require.Equal(t, 3, ptr.AccessDevice)
	require.Equal(t, cu.POINTER_ATTRIBUTE_ACCESS_FLAG_NONE, ptr.Access, "device 3 was granted nothing")
	on0, err := m.PointerOn(0, mp.Addr())
	require.NoError(t, err)
	require.Equal(t, cu.POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE, on0.Access)

	for name, addr := range map[string]cu.DevicePtr{"reserved, not mapped": r.Base() + cu.DevicePtr(2*g), "unreserved": 0x1000} {
		ptr, err := m.Pointer(addr)
		require.NoError(t, err, name)
		require.False(t, ptr.VMM, name)
		how, why := ptr.Share()
		require.Equal(t, vmm.ShareNone, how, name)
		require.Contains(t, why, "the driver does not know the address", name)
	}

	_, err = m.PointerOn(99, mp.Addr())
	require.ErrorIs(t, err, cu.ERROR_INVALID_DEVICE)
	require.NoError(t, s.FailNth(sim.OpPointerAttributes, 1, cu.ERROR_INVALID_CONTEXT))
	_, err = m.Pointer(mp.Addr())
	require.ErrorIs(t, err, cu.ERROR_INVALID_CONTEXT)
	require.Contains(t, err.Error(), "vmm: pointer")
	_, err = (*vmm.Manager)(nil).Pointer(mp.Addr())
	require.ErrorIs(t, err, vmm.ErrInvalid)
}

// What Share says of the memory the VMM API does not make, which sim does not simulate.
func TestShareOfOtherMemory(t *testing.T) {
	for _, c := range []struct {
		p   vmm.Pointer
		why string
	}{
		{vmm.Pointer{PointerAttributes: cu.PointerAttributes{MemoryType: cu.MEMORYTYPE_DEVICE, Mapped: true, LegacyIPC: true}}, "memory of cuMemAlloc"},
		{vmm.Pointer{PointerAttributes: cu.PointerAttributes{MemoryType: cu.MEMORYTYPE_DEVICE, Mapped: true, Mempool: 0x1234}}, "memory of a pool"},
		{vmm.Pointer{PointerAttributes: cu.PointerAttributes{MemoryType: cu.MEMORYTYPE_DEVICE, Mapped: true, Managed: true}}, "managed memory"},
		{vmm.Pointer{PointerAttributes: cu.PointerAttributes{MemoryType: cu.MEMORYTYPE_DEVICE, Mapped: true}}, "finds no allocation"},
		{vmm.Pointer{PointerAttributes: cu.PointerAttributes{MemoryType: cu.MEMORYTYPE_DEVICE}}, "nothing is mapped"},
		{vmm.Pointer{VMM: true, PointerAttributes: cu.PointerAttributes{MemoryType: cu.MEMORYTYPE_DEVICE, Mapped: true, HandleTypes: cu.MEM_HANDLE_TYPE_WIN32}}, "only Win32 handles"},
		{vmm.Pointer{VMM: true, PointerAttributes: cu.PointerAttributes{MemoryType: cu.MEMORYTYPE_DEVICE, Mapped: true}}, "no properties"},
	} {
		how, why := c.p.Share()
		require.Equal(t, vmm.ShareNone, how, c.why)
		require.Contains(t, why, c.why)
	}
	require.Equal(t, "posix-fd", vmm.ShareFD.String())
	require.Equal(t, "ShareMethod(9)", vmm.ShareMethod(9).String())
}
