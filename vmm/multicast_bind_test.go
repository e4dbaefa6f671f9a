package vmm_test

import (
	"bytes"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// hgx8 is the 8-GPU preset with the given driver version: 13000 (the preset's, as the GPU
// hosts') lacks CUDA 13.1's binds, 13010 has them. Device i's HOST_NUMA_ID is i/4.
func hgx8(t *testing.T, driver int) (*sim.Sim, *vmm.Manager) {
	t.Helper()
	c := sim.PresetHGX8()
	c.DriverVersion = driver
	c.HostNUMANodes = 2
	for i := range c.Devices {
		c.Devices[i].Attributes[cu.DEVICE_ATTRIBUTE_HOST_NUMA_ID] = i / 4
	}
	s, err := sim.New(c)
	require.NoError(t, err)
	return s, vmm.New(s)
}

// team creates a multicast object of one granule over devices 0 and 1, both added, closed
// when the test ends; it returns the object and the granule.
func team(t *testing.T, m *vmm.Manager) (*vmm.Multicast, uint64) {
	t.Helper()
	mc, g := teamOf(t, m, 1)
	t.Cleanup(func() { require.NoError(t, mc.Close()) })
	return mc, g
}

// teamOf is team of n granules, which the caller closes.
func teamOf(t *testing.T, m *vmm.Manager, n uint64) (*vmm.Multicast, uint64) {
	t.Helper()
	props := vmm.MulticastProps{Devices: 2}
	g, err := m.MulticastGranularity(props, true)
	require.NoError(t, err)
	props.Size = n * g
	mc, err := m.CreateMulticast(props)
	require.NoError(t, err)
	for dev := range 2 {
		require.NoError(t, mc.AddDevice(dev))
	}
	return mc, g
}

func create(t *testing.T, m *vmm.Manager, size uint64, loc vmm.Location) *vmm.Allocation {
	t.Helper()
	a, err := m.Create(size, vmm.Props{Location: loc})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

// writeThrough maps mc, writes p through it from device 0, and returns what a reads back.
func writeThrough(t *testing.T, m *vmm.Manager, mc *vmm.Multicast, a *vmm.Allocation, p []byte) []byte {
	t.Helper()
	r, err := m.Reserve(mc.Size())
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	mp, err := r.MapMulticast(0, mc)
	require.NoError(t, err)
	require.NoError(t, mp.SetAccess(vmm.ReadWrite(0)...))
	require.NoError(t, m.WriteAt(0, p, mp.Addr()))
	ra, err := m.Reserve(a.Size())
	require.NoError(t, err)
	defer func() { require.NoError(t, ra.Close()) }()
	ma, err := ra.Map(0, a)
	require.NoError(t, err)
	require.NoError(t, ma.SetAccess(vmm.ReadWrite(0)...))
	got := make([]byte, len(p))
	require.NoError(t, m.ReadAt(0, got, ma.Addr()))
	return got
}

// On a 13.0 driver, Bind tries the 13.1 call once per object, finds the symbol missing and
// binds with cuMulticastBindMem from then on.
func TestBindFallsBackTo13_0(t *testing.T) {
	s, m := hgx8(t, 13000)
	mc, size := team(t, m)
	a0, a1 := create(t, m, size, vmm.OnDevice(0)), create(t, m, size, vmm.OnDevice(1))
	require.NoError(t, mc.Bind(0, a0, 0, size))
	require.NoError(t, mc.BindFor(1, 0, a1, 0, size))
	calls := s.Stats().Calls
	require.EqualValues(t, 1, calls["MulticastBindMemV2"], "tried once, then known missing")
	require.EqualValues(t, 2, calls["MulticastBindMem"])
	require.Equal(t, []byte("to both"), writeThrough(t, m, mc, a1, []byte("to both")))

	// Host memory needs the 13.1 call: refused, saying so.
	h := create(t, m, size, vmm.OnHostNUMA(0))
	mc2, _ := team(t, m)
	err := mc2.BindFor(0, 0, h, 0, size)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED)
	require.ErrorIs(t, err, loader.ErrNotSupported)
	require.Contains(t, err.Error(), "only CUDA 13.1's cuMulticastBindMem_v2")
	require.EqualValues(t, 2, s.Stats().Calls["MulticastBindMem"], "no 13.0 call made for host memory")

	// By address: the 13.0 call refuses host memory, and the error says why.
	r, err := m.Reserve(size)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	mh, err := r.Map(0, h)
	require.NoError(t, err)
	err = mc2.BindAddress(0, mh.Addr(), 0, size)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	require.Contains(t, err.Error(), "cuMulticastBindAddr_v2")
	require.Contains(t, err.Error(), "cuMulticastBindAddr:")
}

// On a 13.1 driver the 13.1 calls are made, and bind host NUMA memory too.
func TestBindUses13_1(t *testing.T) {
	s, m := hgx8(t, 13010)
	mc, size := team(t, m)
	a1 := create(t, m, size, vmm.OnDevice(1))
	h := create(t, m, size, vmm.OnHostNUMA(0))
	require.NoError(t, mc.BindFor(0, 0, h, 0, size))
	require.NoError(t, mc.Bind(0, a1, 0, size))
	calls := s.Stats().Calls
	require.EqualValues(t, 2, calls["MulticastBindMemV2"])
	require.Zero(t, calls["MulticastBindMem"])
	p := []byte("host and device")
	require.Equal(t, p, writeThrough(t, m, mc, h, p), "the host replica got the write")
	require.Equal(t, p, writeThrough(t, m, mc, a1, p))

	// By address, for the device whose node the memory is on.
	mc2, _ := team(t, m)
	r, err := m.Reserve(size)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	mh, err := r.Map(0, h)
	require.NoError(t, err)
	require.NoError(t, mc2.BindAddress(0, mh.Addr(), 1, size))
	require.EqualValues(t, 1, s.Stats().Calls["MulticastBindAddrV2"])
	require.Zero(t, s.Stats().Calls["MulticastBindAddr"])
	require.NoError(t, mc2.Unbind(1, 0, size))

	// Memory of node 1 is bound only for devices of node 1 (4 to 7): not for device 0.
	h1 := create(t, m, size, vmm.OnHostNUMA(1))
	err = mc2.BindFor(0, 0, h1, 0, size)
	require.ErrorIs(t, err, cu.ERROR_INVALID_DEVICE)
}

// What is wrong whatever the driver is caught before it is called.
func TestBindArguments(t *testing.T) {
	s, m := hgx8(t, 13010)
	mc, size := team(t, m)
	a0 := create(t, m, size, vmm.OnDevice(0))
	h := create(t, m, size, vmm.OnHostNUMA(0))
	err := mc.BindFor(1, 0, a0, 0, size)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.Contains(t, err.Error(), "bound only for that device")
	err = mc.Bind(0, h, 0, size)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.Contains(t, err.Error(), "BindFor")
	err = mc.BindFor(-1, 0, a0, 0, size)
	require.ErrorIs(t, err, vmm.ErrInvalid, "a device named -1 is no device, not the memory's")
	require.Contains(t, err.Error(), "no device -1")
	require.Zero(t, s.Stats().Calls["MulticastBindMemV2"])

	// A driver's refusal is returned, not taken for a missing call.
	require.NoError(t, s.FailNth(sim.OpMulticastBindMemV2, 1, cu.ERROR_NOT_SUPPORTED))
	err = mc.Bind(0, a0, 0, size)
	require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED)
	require.NotErrorIs(t, err, loader.ErrNotSupported)
	require.Zero(t, s.Stats().Calls["MulticastBindMem"])
	require.NoError(t, mc.Bind(0, a0, 0, size))
	require.True(t, bytes.Equal([]byte{1}, writeThrough(t, m, mc, a0, []byte{1})))
}

// On a 13.0 driver cuMulticastBindAddr binds for the memory's own device: BindAddress
// naming another device is refused before the call (Close would unbind for the device
// named, where nothing is bound), and what it binds for the right one, Close unbinds.
func TestBindAddressOn13_0IsForTheMemorysDevice(t *testing.T) {
	s, m := hgx8(t, 13000)
	mc, size := team(t, m)
	a1 := create(t, m, size, vmm.OnDevice(1))
	r, err := m.Reserve(size)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	mp, err := r.Map(0, a1)
	require.NoError(t, err)
	err = mc.BindAddress(0, mp.Addr(), 0, size)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.Contains(t, err.Error(), "bound only for that device")
	require.Zero(t, s.Stats().Calls["MulticastBindAddr"], "refused before the call")
	require.NoError(t, mc.BindAddress(0, mp.Addr(), 1, size))
	require.EqualValues(t, 1, s.Stats().Bindings)
	require.NoError(t, mc.Close())
	require.Zero(t, s.Stats().Bindings)
}

// An Unbind over several bindings of a device unbinds them all, as the driver does, so
// that Close has none of them left to unbind.
func TestUnbindOverTwoBindings(t *testing.T) {
	s, m := hgx8(t, 13010)
	mc, g := teamOf(t, m, 2)
	a, b := create(t, m, g, vmm.OnDevice(0)), create(t, m, g, vmm.OnDevice(0))
	require.NoError(t, mc.Bind(0, a, 0, g))
	require.NoError(t, mc.Bind(g, b, 0, g))
	require.NoError(t, mc.Unbind(0, 0, 2*g))
	require.Zero(t, s.Stats().Bindings)
	require.NoError(t, mc.Close())
	require.Zero(t, s.Stats().Multicast)
}

// bindAcross makes a multicast object of n granules over devices 0 and 1, maps n
// allocations of device 0 one after another, and binds them at offset 0 with one
// BindAddress: the driver holds n bindings, one per mapping.
func bindAcross(t *testing.T, s *sim.Sim, m *vmm.Manager, n uint64) (*vmm.Multicast, uint64) {
	t.Helper()
	mc, g := teamOf(t, m, n)
	r, err := m.Reserve(n * g)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	for i := range n {
		_, err := r.Map(i*g, create(t, m, g, vmm.OnDevice(0)))
		require.NoError(t, err)
	}
	require.NoError(t, mc.BindAddress(0, r.Base(), 0, n*g))
	require.EqualValues(t, n, s.Stats().Bindings)
	return mc, g
}

// Unbinding the pieces of a BindAddress over several mappings one by one leaves Close
// nothing to unbind; unbinding one in the middle leaves it the two ends, and a bind made
// beside them; on either driver.
func TestUnbindPiecesOfBindAddress(t *testing.T) {
	for _, driver := range []int{13000, 13010} {
		s, m := hgx8(t, driver)
		mc, g := bindAcross(t, s, m, 2)
		require.NoError(t, mc.Unbind(0, 0, g))
		require.NoError(t, mc.Unbind(0, g, g))
		require.Zero(t, s.Stats().Bindings)
		require.NoError(t, mc.Close(), "driver %d", driver)

		mc, g = bindAcross(t, s, m, 3)
		require.NoError(t, mc.Unbind(0, g, g))
		require.NoError(t, mc.Bind(g, create(t, m, g, vmm.OnDevice(0)), 0, g))
		require.NoError(t, mc.Unbind(0, 0, g))
		require.NoError(t, mc.Close(), "driver %d", driver)
		require.Zero(t, s.Stats().Bindings)
		require.Zero(t, s.Stats().Multicast)
	}
}

// A Bind and an Unbind of the same range racing: whichever the driver saw last is what
// Close finds recorded (an Unbind between a Bind's call and its record left a record of
// nothing, and Close failed on it for good).
func TestBindUnbindRace(t *testing.T) {
	s, m := hgx8(t, 13010)
	var a *vmm.Allocation
	for i := range 5000 {
		mc, g := teamOf(t, m, 1)
		if a == nil {
			a = create(t, m, g, vmm.OnDevice(0))
		}
		done := make(chan error, 1)
		go func() { done <- mc.Bind(0, a, 0, g) }()
		for mc.Unbind(0, 0, g) != nil && len(done) == 0 { // until it unbinds or the Bind returned
		}
		require.NoError(t, <-done)
		require.NoError(t, mc.Close(), "iteration %d: the sim holds %d bindings", i, s.Stats().Bindings)
	}
}
