//go:build gpu

package cu

import (
	"errors"
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/stretchr/testify/require"
)

// The optional symbols resolve exactly when the driver is at least as new as the version
// cu asks for: on the 13.0 drivers of the GPU hosts, CUDA 13.1's multicast binds are absent,
// and the binds fail with the symbol's error before any handle is looked at (no multicast
// object is made: the handles are bogus).
func TestGPUOptionalSymbols(t *testing.T) {
	requireDriver(t)
	v, err := DriverVersion()
	require.NoError(t, err)
	for _, p := range Symbols() {
		s := p.Symbol()
		if !OptionalSymbol(s.Name) {
			continue
		}
		err := p.Find()
		t.Logf("driver %d: %s v%d: %v", v, s.Name, s.Version, err)
		if v >= s.Version {
			require.NoError(t, err, s.Name)
			continue
		}
		require.ErrorIs(t, err, loader.ErrNotSupported, s.Name)
		var se *loader.SymbolError
		require.ErrorAs(t, err, &se)
		require.Contains(t, []loader.SymbolStatus{loader.SymbolNotFound, loader.VersionNotSufficient}, se.Status)
	}

	bogus := MemHandle(0xdeadbeef)
	errMem := MulticastBindMemV2(bogus, 0, 0, bogus, 0, 2<<20, 0)
	errAddr := MulticastBindAddrV2(bogus, 0, 0, 0x7f0000000000, 2<<20, 0)
	t.Logf("driver %d: HasMulticastBindV2 %v; bind mem: %v; bind addr: %v", v, HasMulticastBindV2(), errMem, errAddr)
	if v >= 13010 {
		require.True(t, HasMulticastBindV2())
		require.ErrorIs(t, errMem, ErrUnknownHandle)
		require.ErrorIs(t, errAddr, ErrUnknownHandle)
		return
	}
	require.False(t, HasMulticastBindV2())
	for _, err := range []error{errMem, errAddr} {
		require.ErrorIs(t, err, ERROR_NOT_SUPPORTED)
		require.ErrorIs(t, err, loader.ErrNotSupported)
		require.False(t, errors.Is(err, ErrUnknownHandle))
	}
}

// cuPointerGetAttributes on VMM memory (a whole mapping, an inner address, an address past
// it), on cuMemAlloc memory and on an address nothing maps. What the driver reports is
// logged; the conformance suite's pointer/ group records it. Asserted here is only what
// the header documents.
func TestGPUPointerAttributes(t *testing.T) {
	requireDriver(t)
	d, _ := DeviceGet(0)
	ctx, err := d.Primary()
	require.NoError(t, err)
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE},
		RequestedHandleTypes: MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
	g, err := MemGetAllocationGranularity(prop, MEM_ALLOC_GRANULARITY_MINIMUM)
	require.NoError(t, err)
	h, err := MemCreate(g, prop, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, MemRelease(h)) }()
	va, err := MemAddressReserve(4*g, 0, 0, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, MemAddressFree(va, 4*g)) }()
	at := va + DevicePtr(g)
	require.NoError(t, MemMap(at, g, 0, h, 0))
	defer func() { require.NoError(t, MemUnmap(at, g)) }()
	require.NoError(t, MemSetAccess(at, g, []MemAccessDesc{{Location: prop.Location, Flags: MEM_ACCESS_FLAGS_PROT_READWRITE}}))
	t.Logf("reservation %v+%#x, mapping at %v+%#x", va, 4*g, at, g)

	for _, c := range []struct {
		name string
		ptr  DevicePtr
	}{{"mapping start", at}, {"inner address", at + 4096}, {"reserved, not mapped", va}, {"unreserved", 0x1000}} {
		p, err := ctx.PointerAttributes(c.ptr)
		t.Logf("%s (%v): %v (%+v), %v", c.name, c.ptr, p, p, err)
		if c.ptr >= at && c.ptr < at+DevicePtr(g) {
			// The header documents no error for any address, but only these are asserted.
			require.NoError(t, err, c.name)
			require.True(t, p.Mapped, c.name)
			require.Equal(t, MEMORYTYPE_DEVICE, p.MemoryType, c.name)
			require.Equal(t, 0, p.DeviceOrdinal, c.name)
		}
	}

	old, err := ctx.MemAlloc(g)
	require.NoError(t, err)
	defer func() { require.NoError(t, ctx.MemFree(old)) }()
	p, err := ctx.PointerAttributes(old + 8)
	require.NoError(t, err)
	t.Logf("cuMemAlloc memory (%v+8): %v (%+v)", old, p, p)
	require.Equal(t, MEMORYTYPE_DEVICE, p.MemoryType)

	// The call makes its context current itself: another context (or none) current on the
	// thread does not matter.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, cuCtxSetCurrent(0))
	_, err = ctx.PointerAttributes(at)
	require.NoError(t, err)
}
