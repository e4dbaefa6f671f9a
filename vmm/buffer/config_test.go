package buffer_test

import (
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
	"github.com/stretchr/testify/require"
)

func newSimWith(t testing.TB, cfg sim.Config) (*sim.Sim, *vmm.Manager) {
	t.Helper()
	s, err := sim.New(cfg)
	require.NoError(t, err)
	return s, vmm.New(s)
}

// access is what device dev may do at offset off of b, as the sim says.
func access(t *testing.T, s *sim.Sim, b *buffer.Buffer, dev int, off uint64) cu.MemAccessFlags {
	t.Helper()
	f, err := s.GetAccess(vmm.OnDevice(dev), b.Base()+cu.DevicePtr(off))
	require.NoError(t, err)
	return f
}

var (
	rw = cu.MEM_ACCESS_FLAGS_PROT_READWRITE
	ro = cu.MEM_ACCESS_FLAGS_PROT_READ
	no = cu.MEM_ACCESS_FLAGS_PROT_NONE
)

// SetConfig changes the chunks committed after it, and only those; a remap gives every
// chunk its own access back.
func TestSetConfigAppliesToNewChunks(t *testing.T) {
	s, m := newSimWith(t, sim.PresetHGX8())
	b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact, Reserve: 4 * mib, Access: vmm.ReadWrite(1)})
	require.NoError(t, err)
	require.Equal(t, buffer.Config{Props: vmm.DeviceProps(0), Access: vmm.ReadWrite(0, 1)}, b.Config(), "the owner is granted read-write")
	want := vmmtest.Pattern(5, 2*mib)
	_, err = b.WriteAt(want, 0)
	require.NoError(t, err)

	// Device 1 reads only, device 2 reads and writes; the memory is RDMA capable.
	cfg := buffer.Config{Props: vmm.Props{GPUDirectRDMA: true}, Access: append(vmm.ReadOnly(1), vmm.ReadWrite(2)...)}
	calls := b.Stats().Calls
	require.NoError(t, b.SetConfig(cfg))
	require.Equal(t, calls+1, b.Stats().Calls, "a granularity query for the new properties (the attribute query is not counted)")
	got := b.Config()
	require.Equal(t, vmm.OnDevice(0), got.Props.Location, "a zero location is the buffer's device")
	require.Equal(t, append(vmm.ReadWrite(0), cfg.Access...), got.Access)
	require.NoError(t, b.Grow(4*mib))
	chunks := b.Chunks()
	require.Len(t, chunks, 2)
	require.False(t, chunks[0].Props.GPUDirectRDMA)
	require.True(t, chunks[1].Props.GPUDirectRDMA)
	p, err := chunks[1].Allocation.Properties()
	require.NoError(t, err)
	require.Equal(t, uint8(1), p.GPUDirectRDMACapable, "the driver made it RDMA capable")
	check := func() {
		t.Helper()
		require.Equal(t, []cu.MemAccessFlags{rw, rw, no}, []cu.MemAccessFlags{access(t, s, b, 0, 0), access(t, s, b, 1, 0), access(t, s, b, 2, 0)})
		require.Equal(t, []cu.MemAccessFlags{rw, ro, rw}, []cu.MemAccessFlags{access(t, s, b, 0, 2*mib), access(t, s, b, 1, 2*mib), access(t, s, b, 2, 2*mib)})
	}
	check()

	// Force a remap: both chunks are mapped again at a new base, each with its own access.
	unblock := block(t, s, b)
	defer unblock()
	old := b.Base()
	calls = b.Stats().Calls
	require.NoError(t, b.Grow(5*mib))
	require.NotEqual(t, old, b.Base())
	require.Equal(t, 1, b.Stats().Remaps)
	check()
	// Reserve (refused), free it, reserve, map two, create and map one, access for the
	// first chunk and for the other two, unmap and free the old range.
	require.Equal(t, calls+11, b.Stats().Calls)
	requireData(t, b, want)

	// Shrinking and growing back keeps each chunk's access.
	require.NoError(t, b.Shrink(3*mib))
	check()
	require.NoError(t, b.Close())
}

// An owner with read-only access can read its buffer and not write it: the driver refuses
// the copy, as recorded (dangerous/read-only-htod).
func TestReadOnlyOwner(t *testing.T) {
	_, m := newSim(t)
	b, err := buffer.New(m, 2*mib, buffer.Options{Access: vmm.ReadOnly(0)})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, vmm.ReadOnly(0), b.Config().Access, "the owner named keeps what it was given")
	_, err = b.ReadAt(make([]byte, 16), 0)
	require.NoError(t, err)
	_, err = b.WriteAt([]byte{1}, 0)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
}

// What the device lacks fails before any driver call that allocates, with vmm.ErrUnsupported
// (which also matches CUDA_ERROR_NOT_SUPPORTED), and leaves the buffer as it was.
func TestUnsupportedUpFront(t *testing.T) {
	noCompression := sim.PresetH100()
	noCompression.Devices[0].Compression = false
	cases := []struct {
		name  string
		cfg   sim.Config
		props vmm.Props
		what  string
	}{
		{"rdma", sim.PresetWorkstation(), vmm.Props{Location: vmm.OnDevice(0), GPUDirectRDMA: true}, "GPUDirect RDMA with VMM"},
		{"compression", noCompression, vmm.Props{Location: vmm.OnDevice(0), Compressible: true}, "generic compression"},
		{"host", sim.PresetWorkstation(), vmm.Props{Location: vmm.OnHost()}, "host memory"},
		{"host-numa", sim.PresetWorkstation(), vmm.Props{Location: vmm.OnHostNUMA(0)}, "host NUMA memory"},
		{"fabric", sim.PresetWorkstation(), vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_FABRIC}, "fabric handles"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, m := newSimWith(t, c.cfg)
			_, err := buffer.New(m, 2*mib, buffer.Options{Props: &c.props})
			require.ErrorIs(t, err, vmm.ErrUnsupported)
			require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED)
			require.Contains(t, err.Error(), c.what)
			require.True(t, strings.HasPrefix(err.Error(), "buffer: new 2MiB: check props "), err.Error())
			calls := s.Stats().Calls
			require.Zero(t, calls["Granularity"]+calls["Reserve"]+calls["Create"], "nothing reached the driver but attribute queries")

			b, err := buffer.New(m, 2*mib, buffer.Options{})
			require.NoError(t, err)
			before := b.Config()
			err = b.SetConfig(buffer.Config{Props: c.props})
			require.ErrorIs(t, err, vmm.ErrUnsupported)
			require.True(t, strings.HasPrefix(err.Error(), "buffer: set config "), err.Error())
			require.Equal(t, before, b.Config(), "unchanged")
			require.NoError(t, b.Close())
			require.True(t, s.Stats().Clean())
		})
	}
	// The same requests pass on a device that has what they ask for.
	_, m := newSim(t)
	for _, c := range cases[:3] {
		b, err := buffer.New(m, 2*mib, buffer.Options{Props: &c.props})
		require.NoError(t, err, c.name)
		require.NoError(t, b.Close())
	}
}

func TestSetConfigInvalid(t *testing.T) {
	// Device 1 allocates in 4 MiB granules: its memory cannot follow 2 MiB chunks.
	cfg := sim.PresetHGX8()
	cfg.Devices = cfg.Devices[:2]
	cfg.Devices[1].Granularity, cfg.Devices[1].RecommendedGranularity = 4*mib, 4*mib
	s, m := newSimWith(t, cfg)
	b, err := buffer.New(m, 2*mib, buffer.Options{})
	require.NoError(t, err)
	err = b.SetConfig(buffer.Config{Props: vmm.DeviceProps(1)})
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.Contains(t, err.Error(), "needs a granularity of 4MiB, the buffer's is 2MiB")
	err = b.SetConfig(buffer.Config{Access: []cu.MemAccessDesc{{Location: vmm.OnHost(), Flags: rw}}})
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.Equal(t, vmm.ReadWrite(0), b.Config().Access)

	// The other way round is fine: 2 MiB chunks of device 0 after 4 MiB ones of device 1.
	b1, err := buffer.New(m, 4*mib, buffer.Options{Device: 1})
	require.NoError(t, err)
	require.NoError(t, b1.SetConfig(buffer.Config{Props: vmm.DeviceProps(0), Access: vmm.ReadWrite(1)}))
	require.NoError(t, b1.Grow(6*mib))
	require.Equal(t, []uint64{0, 4 * mib}, offsets(b1.Chunks()))
	require.Equal(t, vmm.OnDevice(0), b1.Chunks()[1].Props.Location)

	require.NoError(t, b.Close())
	require.NoError(t, b1.Close())
	require.ErrorIs(t, b.SetConfig(buffer.Config{}), vmm.ErrClosed)
	require.True(t, s.Stats().Clean())
}

// A failed attribute query fails the operation like any driver call, and allocates nothing.
func TestFaultInjectionAttribute(t *testing.T) {
	s, m := newSim(t)
	props := vmm.Props{Location: vmm.OnDevice(0), Compressible: true}
	require.NoError(t, s.FailNth(sim.OpAttribute, 1, cu.ERROR_INVALID_VALUE))
	_, err := buffer.New(m, 2*mib, buffer.Options{Props: &props})
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	require.Contains(t, err.Error(), "buffer: new 2MiB: attribute CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED of device 0: CUDA_ERROR_INVALID_VALUE")
	require.True(t, s.Stats().Clean())

	b, err := buffer.New(m, 2*mib, buffer.Options{})
	require.NoError(t, err)
	require.NoError(t, s.FailNth(sim.OpAttribute, 1, cu.ERROR_INVALID_VALUE))
	require.ErrorIs(t, b.SetConfig(buffer.Config{Props: props}), cu.ERROR_INVALID_VALUE)
	require.NoError(t, s.FailNth(sim.OpGranularity, 1, cu.ERROR_INVALID_VALUE))
	require.ErrorIs(t, b.SetConfig(buffer.Config{Props: props}), cu.ERROR_INVALID_VALUE)
	require.Equal(t, vmm.DeviceProps(0), b.Config().Props)
	require.NoError(t, b.SetConfig(buffer.Config{Props: props}))
	require.Equal(t, props, b.Config().Props)
	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean())
}

// Options.Recommended lays the buffer out in the recommended granularity, where the device
// recommends a coarser one than its minimum.
func TestRecommendedGranularity(t *testing.T) {
	cfg := sim.PresetH100()
	cfg.Devices[0].RecommendedGranularity = 8 * mib
	_, m := newSimWith(t, cfg)
	for _, c := range []struct {
		rec  bool
		want uint64
	}{{false, 2 * mib}, {true, 8 * mib}} {
		b, err := buffer.New(m, 1*mib, buffer.Options{Recommended: c.rec, Policy: buffer.Exact})
		require.NoError(t, err)
		st := b.Stats()
		require.Equal(t, c.want, st.Granularity, "recommended %v", c.rec)
		require.Equal(t, c.want, st.Committed, "1 MiB rounded up to one granule")
		require.NoError(t, b.Close())
	}
}
