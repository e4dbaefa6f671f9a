package vmm_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// chunked reserves len(props) granules and maps one allocation of each props there, one
// after another, with read-write access for its device; closed at cleanup, when the Sim
// must hold nothing.
func chunked(t *testing.T, s *sim.Sim, props ...vmm.Props) (*vmm.Manager, *vmm.Reservation) {
	t.Helper()
	m := vmm.New(s)
	r, err := m.Reserve(uint64(len(props)) * 2 * mib)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, r.Close())
		require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	})
	for i, p := range props {
		a, err := m.Create(2*mib, p)
		require.NoError(t, err)
		mp, err := r.Map(uint64(i)*2*mib, a)
		require.NoError(t, err)
		require.NoError(t, a.Close())
		require.NoError(t, mp.SetAccess(vmm.ReadWrite(int(p.Location.ID))...))
	}
	return m, r
}

func rdmaProps(dev int) vmm.Props {
	p := vmm.DeviceProps(dev)
	p.GPUDirectRDMA = true
	return p
}

func TestDmaBufExportsEveryChunk(t *testing.T) {
	s := newSim(t)
	m, r := chunked(t, s, rdmaProps(0), rdmaProps(0), rdmaProps(0))

	for name, export := range map[string]func() (*vmm.DmaBuf, error){
		"reservation": func() (*vmm.DmaBuf, error) { return r.ExportDmaBuf(0, r.Size()) },
		"manager":     func() (*vmm.DmaBuf, error) { return m.ExportDmaBuf(r.Base(), r.Size()) },
	} {
		t.Run(name, func(t *testing.T) {
			d, err := export()
			require.NoError(t, err)
			defer func() { require.NoError(t, d.Close()) }()
			assert.Equal(t, r.Base(), d.Addr)
			assert.EqualValues(t, 6*mib, d.Size)
			assert.Equal(t, 0, d.Device)
			assert.Equal(t, 3, d.Chunks)
			assert.EqualValues(t, 1, d.Props.GPUDirectRDMACapable)
			info, err := sim.DmaBufInfo(d.FD())
			require.NoError(t, err)
			assert.Equal(t, sim.DmaBuf{Addr: r.Base(), Size: 6 * mib, Device: 0, Chunks: 3, Props: d.Props}, info)
			assert.Contains(t, d.String(), "6MiB of device 0, 3 chunk(s)")
		})
	}

	// A part of the range: the chunks it touches.
	d, err := r.ExportDmaBuf(2*mib-4096, 8192)
	require.NoError(t, err)
	assert.Equal(t, 2, d.Chunks)
	require.NoError(t, d.Close())
}

func TestDmaBufRulesAreCheckedFirst(t *testing.T) {
	page := uint64(os.Getpagesize())
	for _, c := range []struct {
		name   string
		preset func() sim.Config
		props  []vmm.Props
		unmap  uint64 // a granule to unmap, 1-based (0: none)
		off    uint64
		size   uint64
		want   []error
		says   string
	}{
		{"hole", sim.PresetH200, []vmm.Props{vmm.DeviceProps(0), vmm.DeviceProps(0), vmm.DeviceProps(0)}, 2, 0, 6 * mib,
			[]error{vmm.ErrHole, vmm.ErrInvalid, cu.ERROR_INVALID_VALUE}, "a hole: part of the range is not mapped: 0x302200000+2MiB (offset 2MiB of the range) is not mapped"},
		{"hole-at-the-end", sim.PresetH200, []vmm.Props{vmm.DeviceProps(0), vmm.DeviceProps(0)}, 2, 0, 4 * mib,
			[]error{vmm.ErrHole}, "(offset 2MiB of the range) is not mapped"},
		{"compressible-second", sim.PresetH200, []vmm.Props{{Location: vmm.OnDevice(0)}, {Location: vmm.OnDevice(0), Compressible: true}}, 0, 0, 4 * mib,
			[]error{vmm.ErrUnsupported}, "the chunk at 0x302200000 (offset 2MiB of the range) is compressible memory, which the driver does not export as a dma-buf (it fails with CUDA_ERROR_UNKNOWN)"},
		{"compressible-first", sim.PresetH200, []vmm.Props{{Location: vmm.OnDevice(0), Compressible: true}, {Location: vmm.OnDevice(0)}}, 0, 0, 4 * mib,
			[]error{vmm.ErrUnsupported}, "the chunk at 0x302000000 (offset 0B of the range) is compressible memory"},
		{"host", sim.PresetH200, []vmm.Props{{Location: vmm.OnHost()}}, 0, 0, 2 * mib,
			[]error{vmm.ErrUnsupported}, "the driver exports dma-bufs of device memory only"},
		{"two-devices", sim.PresetHGX8, []vmm.Props{vmm.DeviceProps(0), vmm.DeviceProps(1)}, 0, 0, 4 * mib,
			[]error{vmm.ErrMixedDevices, cu.ERROR_INVALID_VALUE}, "is memory of device 1, the range starts with memory of device 0"},
		{"misaligned-address", sim.PresetH200, []vmm.Props{vmm.DeviceProps(0)}, 0, 1, page,
			[]error{vmm.ErrMisaligned, vmm.ErrInvalid}, "is not a multiple of the host page size"},
		{"misaligned-size", sim.PresetH200, []vmm.Props{vmm.DeviceProps(0)}, 0, 0, page + 1,
			[]error{vmm.ErrMisaligned}, "size 4097B is not a multiple of the host page size"},
		{"size-0", sim.PresetH200, []vmm.Props{vmm.DeviceProps(0)}, 0, 0, 0,
			[]error{vmm.ErrInvalid}, "size 0"},
		{"past-the-reservation", sim.PresetH200, []vmm.Props{vmm.DeviceProps(0)}, 0, 0, 4 * mib,
			[]error{vmm.ErrOutOfRange}, "out of range"},
		{"unsupported-device", sim.PresetWorkstation, []vmm.Props{vmm.DeviceProps(0)}, 0, 0, 2 * mib,
			[]error{vmm.ErrUnsupported, cu.ERROR_NOT_SUPPORTED}, "device 0 cannot export dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := sim.New(c.preset())
			require.NoError(t, err)
			m, r := chunked(t, s, c.props...)
			if c.unmap > 0 {
				require.NoError(t, r.Unmap((c.unmap-1)*2*mib, 2*mib))
			}
			exports := func() uint64 { return s.Stats().Calls["ExportDmaBuf"] }
			before := exports()
			d, err := r.ExportDmaBuf(c.off, c.size)
			assert.Nil(t, d)
			for _, w := range c.want {
				require.ErrorIs(t, err, w)
			}
			assert.ErrorContains(t, err, "vmm: export dma-buf ")
			assert.ErrorContains(t, err, c.says)
			assert.Equal(t, before, exports(), "the driver was not asked")
			if c.name != "past-the-reservation" {
				// The manager's walk finds the same.
				d, err := m.ExportDmaBuf(r.Base()+cu.DevicePtr(c.off), c.size)
				assert.Nil(t, d)
				require.ErrorIs(t, err, c.want[0])
				assert.Equal(t, before, exports(), "the driver was not asked")
			}
		})
	}
}

// The manager's walk reads no access as a hole (cuMemGetAddressRange does not see such a
// mapping); the reservation knows its mappings, and the driver takes it.
func TestDmaBufMappingWithoutAccess(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	r, err := m.Reserve(2 * mib)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	a, err := m.Create(2*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	_, err = r.Map(0, a)
	require.NoError(t, err)

	_, err = m.ExportDmaBuf(r.Base(), 2*mib)
	require.ErrorIs(t, err, vmm.ErrHole)
	assert.ErrorContains(t, err, "nothing that a device may access is mapped at 0x302000000 (offset 0B of the range)")

	d, err := r.ExportDmaBuf(0, 2*mib)
	require.NoError(t, err)
	require.NoError(t, d.Close())
}

// Chunks that misdescribe the memory pass the checks; the driver refuses.
func TestDmaBufChunksDriverHasTheLastWord(t *testing.T) {
	s := newSim(t)
	m, r := chunked(t, s, vmm.DeviceProps(0))
	p := vmm.DeviceProps(0).Driver()
	lie := []vmm.DmaBufChunk{{Addr: r.Base(), Size: 4 * mib, Props: p}}
	_, err := m.ExportDmaBufChunks(r.Base(), 4*mib, lie)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	assert.NotErrorIs(t, err, vmm.ErrHole)
	assert.ErrorContains(t, err, "(nothing is mapped at 0x302200000", "sim's reason")

	d, err := m.ExportDmaBufChunks(r.Base(), 2*mib, []vmm.DmaBufChunk{{Addr: r.Base(), Size: 2 * mib, Props: p}})
	require.NoError(t, err)
	assert.Equal(t, 1, d.Chunks)
	require.NoError(t, d.Close())
	_, err = m.ExportDmaBufChunks(r.Base(), 2*mib, nil)
	require.ErrorIs(t, err, vmm.ErrHole)
}

func TestDmaBufViaPCIe(t *testing.T) {
	cfg := sim.PresetH200()
	cfg.Devices[0].DmaBufPCIe = true
	s, err := sim.New(cfg)
	require.NoError(t, err)
	_, r := chunked(t, s, vmm.DeviceProps(0))
	d, err := r.ExportDmaBuf(0, 2*mib, vmm.ViaPCIe())
	require.NoError(t, err)
	assert.True(t, d.PCIe)
	info, err := sim.DmaBufInfo(d.FD())
	require.NoError(t, err)
	assert.EqualValues(t, cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, info.Flags)
	assert.Contains(t, d.String(), "via PCIe")
	require.NoError(t, d.Close())

	// A platform that does not offer it: the H200s the driver was recorded on.
	s = newSim(t)
	_, r = chunked(t, s, vmm.DeviceProps(0))
	_, err = r.ExportDmaBuf(0, 2*mib, vmm.ViaPCIe(), nil)
	require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED)
	assert.ErrorContains(t, err, "vmm: export dma-buf 0x302000000+2MiB via PCIe: ")
	assert.ErrorContains(t, err, "export without ViaPCIe")
}

func TestDmaBufOwnership(t *testing.T) {
	s := newSim(t)
	m, r := chunked(t, s, vmm.DeviceProps(0))
	ok, err := m.DmaBufSupported(0)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = vmm.New(mustSim(t, sim.PresetWorkstation)).DmaBufSupported(0)
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = m.DmaBufSupported(7)
	require.ErrorIs(t, err, cu.ERROR_INVALID_DEVICE)

	d, err := r.ExportDmaBuf(0, 2*mib)
	require.NoError(t, err)
	fd := d.Take()
	assert.GreaterOrEqual(t, fd, 0)
	assert.Equal(t, -1, d.FD())
	assert.Equal(t, -1, d.Take())
	require.NoError(t, d.Close(), "nothing left to close")
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st), "the caller's now")
	require.NoError(t, unix.Close(fd))

	d, err = r.ExportDmaBuf(0, 2*mib)
	require.NoError(t, err)
	fd = d.FD()
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "idempotent")
	assert.ErrorIs(t, unix.Fstat(fd, &st), unix.EBADF)

	w := vmm.NewDmaBuf(-1, 0x1000, 4096)
	assert.Equal(t, -1, w.Device)
	require.NoError(t, w.Close())
	w = vmm.NewDmaBuf(-5, 0x1000, 4096)
	assert.Equal(t, -1, w.FD(), "a negative descriptor is none")
	assert.ErrorIs(t, w.Use(func(int) error { return nil }), vmm.ErrClosed)

	var nilBuf *vmm.DmaBuf
	assert.ErrorIs(t, nilBuf.Close(), vmm.ErrInvalid)
	assert.Equal(t, -1, nilBuf.FD())
	assert.Equal(t, -1, nilBuf.Take())
	assert.Equal(t, "dma-buf <nil>", nilBuf.String())

	// Nil and closed objects.
	var nilManager *vmm.Manager
	_, err = nilManager.ExportDmaBuf(0x1000, 4096)
	assert.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = nilManager.ExportDmaBufChunks(0x1000, 4096, nil)
	assert.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = nilManager.DmaBufSupported(0)
	assert.ErrorIs(t, err, vmm.ErrInvalid)
	var nilResv *vmm.Reservation
	_, err = nilResv.ExportDmaBuf(0, 4096)
	assert.ErrorIs(t, err, vmm.ErrInvalid)
	closed, err := m.Reserve(2 * mib)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	_, err = closed.ExportDmaBuf(0, 2*mib)
	assert.ErrorIs(t, err, vmm.ErrClosed)
}

// The zero DmaBuf holds no descriptor: it must not take descriptor 0 (stdin) for its own.
// Use holds the descriptor open: a Close during it waits.
func TestDmaBufZeroAndUse(t *testing.T) {
	var zero vmm.DmaBuf
	assert.Equal(t, -1, zero.FD())
	assert.Equal(t, -1, zero.Take())
	require.NoError(t, zero.Close())
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(0, &st), "descriptor 0 is still open")
	assert.ErrorIs(t, zero.Use(func(int) error { t.Error("called without a descriptor"); return nil }), vmm.ErrClosed)
	var nilBuf *vmm.DmaBuf
	assert.ErrorIs(t, nilBuf.Use(func(int) error { return nil }), vmm.ErrInvalid)

	s := newSim(t)
	_, r := chunked(t, s, vmm.DeviceProps(0))
	d, err := r.ExportDmaBuf(0, 2*mib)
	require.NoError(t, err)
	closed := make(chan error, 1)
	err = d.Use(func(fd int) error {
		go func() { closed <- d.Close() }()
		time.Sleep(20 * time.Millisecond)
		select {
		case err := <-closed:
			t.Errorf("Close returned (%v) while Use ran", err)
		default:
		}
		// d's other methods still answer while a Close waits (a read lock taken twice
		// with a writer waiting would hang here).
		assert.Equal(t, fd, d.FD())
		assert.Contains(t, fmt.Sprint(d), "dma-buf fd")
		assert.ErrorIs(t, d.Use(func(int) error { return nil }), vmm.ErrClosed, "closing: no new Use")
		return unix.Fstat(fd, &st)
	})
	require.NoError(t, err, "the descriptor stayed open during Use")
	require.NoError(t, <-closed)
	assert.Equal(t, -1, d.FD())
	want := errors.New("f's error")
	d, err = r.ExportDmaBuf(0, 2*mib)
	require.NoError(t, err)
	defer d.Close()
	assert.Same(t, want, d.Use(func(int) error { return want }))
}

func mustSim(t *testing.T, preset func() sim.Config) *sim.Sim {
	t.Helper()
	s, err := sim.New(preset())
	require.NoError(t, err)
	return s
}

// A driver error that is not a rule's passes through with its result.
func TestDmaBufDriverErrors(t *testing.T) {
	s := newSim(t)
	m, r := chunked(t, s, vmm.DeviceProps(0))
	require.NoError(t, s.FailNth(sim.OpRetain, 1, cu.ERROR_OUT_OF_MEMORY))
	_, err := r.ExportDmaBuf(0, 2*mib)
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	assert.ErrorContains(t, err, "retain 0x302000000")
	require.NoError(t, s.FailNth(sim.OpProperties, 1, cu.ERROR_UNKNOWN))
	_, err = m.ExportDmaBuf(r.Base(), 2*mib)
	require.ErrorIs(t, err, cu.ERROR_UNKNOWN)
	require.NoError(t, s.FailNth(sim.OpAddressRange, 1, cu.ERROR_INVALID_CONTEXT))
	_, err = m.ExportDmaBuf(r.Base(), 2*mib)
	require.ErrorIs(t, err, cu.ERROR_INVALID_CONTEXT)
	require.NoError(t, s.FailNth(sim.OpAttribute, 1, cu.ERROR_UNKNOWN))
	_, err = r.ExportDmaBuf(0, 2*mib)
	require.ErrorIs(t, err, cu.ERROR_UNKNOWN)
	// A release the driver refuses leaves the reference the question took: the error says
	// so, and it is the caller's to drop (here, by value: the mapping's handle).
	require.NoError(t, s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN))
	_, err = r.ExportDmaBuf(0, 2*mib)
	require.True(t, errors.Is(err, cu.ERROR_UNKNOWN))
	assert.ErrorContains(t, err, "release ")
	h, err := s.Retain(r.Base())
	require.NoError(t, err)
	require.NoError(t, s.Release(h))
	require.NoError(t, s.Release(h))
}
