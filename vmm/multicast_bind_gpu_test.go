//go:build gpu

package vmm_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// noFabric is the real driver with the multicast calls that would touch the NVSwitch fabric
// answered here instead: no multicast object is ever created on the GPU hosts. Creating one
// returns a made-up handle; adding devices, the CUDA 13.0 binds and unbinding it succeed and
// are counted; releasing it does nothing. CUDA 13.1's binds go to the driver, which, lacking
// them, refuses before looking at the made-up handle (cu resolves the symbol first).
type noFabric struct {
	vmm.Backend
	v1Mem, v1Addr int
}

const fakeMC = cu.MemHandle(0x6d63000000000001)

func (*noFabric) MulticastGranularity(*cu.MulticastObjectProp, cu.MulticastGranularityFlags) (uint64, error) {
	return 2 << 20, nil
}
func (*noFabric) MulticastCreate(*cu.MulticastObjectProp) (cu.MemHandle, error) { return fakeMC, nil }
func (*noFabric) MulticastAddDevice(cu.MemHandle, int) error                    { return nil }
func (f *noFabric) MulticastBindMem(mc cu.MemHandle, _ uint64, _ cu.MemHandle, _, _, _ uint64) error {
	f.v1Mem++
	return nil
}
func (f *noFabric) MulticastBindAddr(mc cu.MemHandle, _ uint64, _ cu.DevicePtr, _, _ uint64) error {
	f.v1Addr++
	return nil
}
func (*noFabric) MulticastUnbind(cu.MemHandle, int, uint64, uint64) error { return nil }
func (f *noFabric) Release(h cu.MemHandle) error {
	if h == fakeMC {
		return nil
	}
	return f.Backend.Release(h)
}

// On the 13.0 driver of the GPU hosts, CUDA 13.1's multicast binds are absent, and
// Multicast.Bind and BindAddress fall back to the 13.0 calls (answered by noFabric: no
// multicast object is created). Host memory, which only the 13.1 calls bind, is refused
// with ErrUnsupported before any bind is made.
func TestGPUMulticastBindFallsBackTo13_0(t *testing.T) {
	drv := cudaOrSkip(t)
	v, err := drv.DriverVersion()
	require.NoError(t, err)
	if v >= 13010 {
		t.Skipf("driver %d has CUDA 13.1's binds: this test is for the 13.0 path", v)
	}
	require.False(t, cu.HasMulticastBindV2(), "driver %d", v)
	err = drv.MulticastBindMemV2(fakeMC, 0, 0, fakeMC, 0, 2<<20, 0)
	t.Logf("driver %d: cuMulticastBindMem_v2: %v", v, err)
	require.ErrorIs(t, err, loader.ErrNotSupported)
	require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED)
	require.NotErrorIs(t, err, cu.ErrUnknownHandle, "the symbol is looked for first")
	require.ErrorIs(t, drv.MulticastBindAddrV2(fakeMC, 0, 0, 0x7f0000000000, 2<<20, 0), loader.ErrNotSupported)

	b := &noFabric{Backend: drv}
	m := vmm.New(b)
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	require.NoError(t, err)
	mc, err := m.CreateMulticast(vmm.MulticastProps{Devices: 1, Size: 2 * g})
	require.NoError(t, err)
	defer func() { require.NoError(t, mc.Close()) }()
	require.NoError(t, mc.AddDevice(0))

	a, err := m.Create(g, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	require.NoError(t, mc.Bind(0, a, 0, g))
	require.Equal(t, 1, b.v1Mem, "Bind made the 13.0 call")

	r, err := m.Reserve(g)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	mp, err := r.Map(0, a)
	require.NoError(t, err)
	require.NoError(t, mc.BindAddress(g, mp.Addr(), 0, g))
	require.Equal(t, 1, b.v1Addr, "BindAddress made the 13.0 call")

	h, err := m.Create(g, vmm.Props{Location: vmm.OnHostNUMA(0)})
	if err != nil {
		t.Logf("no host NUMA memory to try binding: %v", err)
		return
	}
	defer func() { require.NoError(t, h.Close()) }()
	err = mc.BindFor(0, 0, h, 0, g)
	t.Logf("host NUMA memory: %v", err)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	require.Equal(t, 1, b.v1Mem, "no 13.0 call for host memory")
}
