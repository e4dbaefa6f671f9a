package sim_test

import (
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// chunks maps n allocations of 2 MiB made with props (one per allocation, the last reused)
// one after another in one reservation of n+extra granules, each with read-write access for
// its own device, undoing it all at cleanup.
func chunks(t *testing.T, s *sim.Sim, n, extra int, props ...*cu.MemAllocationProp) cu.DevicePtr {
	t.Helper()
	size := uint64(n+extra) * 2 * mib
	va, err := s.Reserve(size, 0, 0, 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.Unmap(va, size))
		assert.NoError(t, s.Free(va, size))
	})
	for i := range n {
		p := props[min(i, len(props)-1)]
		h, err := s.Create(2*mib, p, 0)
		require.NoError(t, err)
		at := va + cu.DevicePtr(i)*2*mib
		require.NoError(t, s.Map(at, 2*mib, 0, h, 0))
		require.NoError(t, s.Release(h))
		require.NoError(t, s.SetAccess(at, 2*mib, rwDesc(int(p.Location.ID))))
	}
	return va
}

// exportDmaBuf exports and describes a dma-buf, closing it at cleanup.
func exportDmaBuf(t *testing.T, s *sim.Sim, va cu.DevicePtr, size, flags uint64) sim.DmaBuf {
	t.Helper()
	fd, err := s.ExportDmaBuf(va, size, flags)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	d, err := sim.DmaBufInfo(fd)
	require.NoError(t, err)
	end, err := unix.Seek(fd, 0, unix.SEEK_END)
	require.NoError(t, err)
	assert.EqualValues(t, size, end, "a dma-buf's size is what lseek to its end says")
	return d
}

func TestDmaBufMultiChunk(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	p := devProp(0, 0)
	va := chunks(t, s, 3, 0, p)

	d := exportDmaBuf(t, s, va, 6*mib, 0)
	assert.Equal(t, sim.DmaBuf{Addr: va, Size: 6 * mib, Device: 0, Chunks: 3, Props: *p}, d)
	assert.Contains(t, d.String(), "3 chunks")

	// What libfabric, UCX and the others exported: the first mapping's extent.
	base, size, err := s.AddressRange(va + 3*mib)
	require.NoError(t, err)
	assert.Equal(t, va+2*mib, base)
	assert.EqualValues(t, 2*mib, size, "cuMemGetAddressRange returns one mapping, not the buffer")

	// A part of one mapping, aligned to the host page size.
	page := uint64(os.Getpagesize())
	d = exportDmaBuf(t, s, va+cu.DevicePtr(page), 2*mib-page, 0)
	assert.Equal(t, 1, d.Chunks)
	assert.EqualValues(t, 2, s.Stats().Calls["ExportDmaBuf"], "calls are counted")
}

func TestDmaBufPCIe(t *testing.T) {
	cfg := sim.PresetH200()
	cfg.Devices[0].DmaBufPCIe = true
	s, err := sim.New(cfg)
	require.NoError(t, err)
	d := exportDmaBuf(t, s, chunks(t, s, 2, 0, devProp(0, 0)), 4*mib, cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)
	assert.Equal(t, 2, d.Chunks)
	assert.EqualValues(t, cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, d.Flags)
}

// Allocations that differ in GPUDirect RDMA capability or in shareable handle types export
// as one dma-buf, as the driver does (recorded: dmabuf/gpudirect-rdma-and-not,
// dmabuf/handle-types-differ); the description carries the first's properties.
func TestDmaBufMixedProperties(t *testing.T) {
	rdma := devProp(0, 0)
	rdma.GPUDirectRDMACapable = 1
	for name, props := range map[string][]*cu.MemAllocationProp{
		"rdma-and-not": {rdma, devProp(0, 0)},
		"handle-types": {devProp(0, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), devProp(0, 0)},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := sim.New(sim.PresetH200())
			require.NoError(t, err)
			d := exportDmaBuf(t, s, chunks(t, s, 2, 0, props...), 4*mib, 0)
			assert.Equal(t, 2, d.Chunks)
			assert.Equal(t, *props[0], d.Props)
		})
	}
}

func TestDmaBufRules(t *testing.T) {
	page := uint64(os.Getpagesize())
	comp := devProp(0, 0)
	comp.CompressionType = cu.MEM_ALLOCATION_COMP_GENERIC
	host := &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}}
	for _, c := range []struct {
		name   string
		preset func() sim.Config
		setup  func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64)
		want   cu.Result
		reason string
	}{
		{"hole", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			va := chunks(t, s, 1, 2, devProp(0, 0))
			h, err := s.Create(2*mib, devProp(0, 0), 0)
			require.NoError(t, err)
			require.NoError(t, s.Map(va+4*mib, 2*mib, 0, h, 0))
			require.NoError(t, s.Release(h))
			return va, 6 * mib, 0
		}, cu.ERROR_INVALID_VALUE, "nothing is mapped at"},
		{"past-the-mapping", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 1, devProp(0, 0)), 4 * mib, 0
		}, cu.ERROR_INVALID_VALUE, "offset 2097152 of the range"},
		{"unreserved", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return 0x1000000000, 2 * mib, 0
		}, cu.ERROR_INVALID_VALUE, "nothing is mapped"},
		{"misaligned-address", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, devProp(0, 0)) + 1, page, 0
		}, cu.ERROR_INVALID_VALUE, "host page size"},
		{"misaligned-size", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, devProp(0, 0)), page + 1, 0
		}, cu.ERROR_INVALID_VALUE, "host page size"},
		{"size-0", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, devProp(0, 0)), 0, 0
		}, cu.ERROR_INVALID_VALUE, "size 0"},
		{"wraps", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, devProp(0, 0)), ^uint64(0) &^ (page - 1), 0
		}, cu.ERROR_INVALID_VALUE, "wraps"},
		{"unknown-flag", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, devProp(0, 0)), 2 * mib, 2
		}, cu.ERROR_INVALID_VALUE, "flags"},
		{"pcie", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, devProp(0, 0)), 2 * mib, cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE
		}, cu.ERROR_NOT_SUPPORTED, "PCIe BAR1"},
		{"compressible-second", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 2, 0, devProp(0, 0), comp), 4 * mib, 0
		}, cu.ERROR_UNKNOWN, "compressible"},
		{"two-devices", sim.PresetHGX8, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 2, 0, devProp(0, 0), devProp(1, 0)), 4 * mib, 0
		}, cu.ERROR_INVALID_VALUE, "memory of device 1, the range starts with memory of device 0"},
		{"host", sim.PresetH200, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, host), 2 * mib, 0
		}, cu.ERROR_INVALID_VALUE, "host-located"},
		{"unsupported-device", sim.PresetWorkstation, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			return chunks(t, s, 1, 0, devProp(0, 0)), 2 * mib, 0
		}, cu.ERROR_NOT_SUPPORTED, "DMA_BUF_SUPPORTED is 0"},
		{"multicast", sim.PresetHGX8, func(t *testing.T, s *sim.Sim) (cu.DevicePtr, uint64, uint64) {
			mc, err := s.MulticastCreate(&cu.MulticastObjectProp{NumDevices: 1, Size: 2 * mib})
			require.NoError(t, err)
			require.NoError(t, s.MulticastAddDevice(mc, 0))
			va, err := s.Reserve(2*mib, 0, 0, 0)
			require.NoError(t, err)
			require.NoError(t, s.Map(va, 2*mib, 0, mc, 0))
			t.Cleanup(func() {
				assert.NoError(t, s.Unmap(va, 2*mib))
				assert.NoError(t, s.Free(va, 2*mib))
				assert.NoError(t, s.Release(mc))
			})
			return va, 2 * mib, 0
		}, cu.ERROR_INVALID_VALUE, "multicast"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := sim.New(c.preset())
			require.NoError(t, err)
			t.Cleanup(func() { assert.True(t, s.Stats().Clean(), "%+v", s.Stats()) })
			va, size, flags := c.setup(t, s)
			fd, err := s.ExportDmaBuf(va, size, flags)
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, -1, fd)
			assert.ErrorContains(t, err, c.reason)
			assert.ErrorContains(t, err, "cuMemGetHandleForAddressRange")
		})
	}
}

// The descriptor outlives the mapping and the memory it was exported from; it describes
// what it was exported from, and is not an allocation to import.
func TestDmaBufOutlivesItsMemory(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	h, err := s.Create(4*mib, devProp(0, 0), 0)
	require.NoError(t, err)
	va, err := s.Reserve(4*mib, 0, 0, 0)
	require.NoError(t, err)
	require.NoError(t, s.Map(va, 4*mib, 0, h, 0))
	fd, err := s.ExportDmaBuf(va, 4*mib, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, s.Unmap(va, 4*mib))
	require.NoError(t, s.Free(va, 4*mib))
	require.NoError(t, s.Release(h))
	assert.True(t, s.Stats().Clean())

	d, err := sim.DmaBufInfo(fd)
	require.NoError(t, err)
	assert.Equal(t, va, d.Addr)
	assert.EqualValues(t, 4*mib, d.Size)

	_, err = s.ImportFD(fd)
	assert.ErrorIs(t, err, cu.ERROR_UNKNOWN, "a dma-buf is not an exported allocation")
	// Sealed: its size, which tells the range's, cannot change.
	assert.Error(t, unix.Ftruncate(fd, 0))
}

func TestDmaBufInfoRefusesOtherDescriptors(t *testing.T) {
	s, va, h := mapped(t, sim.PresetH200(), cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	_ = va
	shared, err := s.ExportFD(h)
	require.NoError(t, err)
	defer unix.Close(shared)
	_, err = sim.DmaBufInfo(shared)
	assert.ErrorContains(t, err, "not a dma-buf sim exported")

	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	_, err = sim.DmaBufInfo(p[0])
	assert.Error(t, err)
	_, err = sim.DmaBufInfo(-1)
	assert.Error(t, err)

	// A memfd named like one, but of another size than its name says, then unsealed.
	fd, err := unix.MemfdCreate("cuvmm-sim.dmabuf:a=302000000,s=2097152,d=0,n=1,f=0,p=1:0:1:0:0:0:0",
		unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = sim.DmaBufInfo(fd)
	assert.ErrorContains(t, err, "not a dma-buf sim exported")
	require.NoError(t, unix.Ftruncate(fd, 2*mib))
	_, err = sim.DmaBufInfo(fd)
	assert.ErrorContains(t, err, "not a dma-buf sim exported", "unsealed: its size could change")
	const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
	require.NoError(t, err)
	d, err := sim.DmaBufInfo(fd)
	require.NoError(t, err, "a sealed memfd whose name and size agree describe one")
	assert.EqualValues(t, 2*mib, d.Size)

	// Names that do not parse, and descriptions ExportDmaBuf could not have written.
	for _, name := range []string{
		"cuvmm-sim.dmabuf:", "cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=0", "cuvmm-sim.dmabuf:s=2,a=1,d=0,n=1,f=0,p=1:0:1:0:0:0:0",
		"cuvmm-sim.dmabuf:a=zz,s=2,d=0,n=1,f=0,p=1:0:1:0:0:0:0", "cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=0,p=1:0:1:0:0:0",
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=0,p=1:0:1:0:0:999:0",
		"cuvmm-sim.dmabuf:a=1,s=2,d=-7,n=1,f=0,p=1:0:1:-7:0:0:0",        // a negative device
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=-5,f=0,p=1:0:1:0:0:0:0",         // no chunks
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=0,p=1:0:1:0:-1:0:0",         // a compression type under 0
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=0,p=1:0:1:0:0:0:70000",      // a usage over 16 bits
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=2,p=1:0:1:0:0:0:0",          // an unknown flag
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=0,p=1:0:2:0:0:0:0",          // host memory
		"cuvmm-sim.dmabuf:a=1,s=2,d=1,n=1,f=0,p=1:0:1:0:0:0:0",          // memory of another device
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=5000000000,f=0,p=1:0:1:0:0:0:0", // more chunks than 32 bits
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=+1,f=0,p=1:0:1:0:0:0:0",         // a spelling ExportDmaBuf does not write
		"cuvmm-sim.dmabuf:a=01,s=2,d=0,n=1,f=0,p=1:0:1:0:0:0:0",         // nor this
	} {
		fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		require.NoError(t, err)
		require.NoError(t, unix.Ftruncate(fd, 2))
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
		require.NoError(t, err)
		_, err = sim.DmaBufInfo(fd)
		assert.Error(t, err, name)
		unix.Close(fd)
	}
}
