package sleep_test

import (
	"context"
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/sleep"
	"github.com/cuvmm/cuvmm/vmm/sparse"
	"github.com/stretchr/testify/require"
)

// h200 is a simulated H200 and a Manager over it.
func h200(t *testing.T) (*sim.Sim, *vmm.Manager) {
	t.Helper()
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	return s, vmm.New(s)
}

// growMoving grows b by more bytes with the range after its reservation taken, so that the
// buffer moves to a new base.
func growMoving(t *testing.T, m *vmm.Manager, b *buffer.Buffer, more uint64) {
	t.Helper()
	taken, err := m.Reserve(2*mib, vmm.At(b.Base()+cu.DevicePtr(b.Stats().Reserved)))
	require.NoError(t, err)
	require.NoError(t, b.Grow(b.Size()+more))
	require.NoError(t, taken.Close())
	require.Equal(t, 1, b.Stats().Remaps)
}

// ownRegion is a region its caller made: n chunks of 2 MiB of device 0, read-write.
func ownRegion(t *testing.T, m *vmm.Manager, props vmm.Props, n int) *vmm.Region {
	t.Helper()
	g, err := m.NewRegion(uint64(n)*2*mib, 0)
	require.NoError(t, err)
	tx := m.Begin(nil)
	allocs := make([]*vmm.Allocation, n)
	for i := range allocs {
		allocs[i], err = tx.Create(2*mib, props)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Add(g, 0, vmm.ReadWrite(0), allocs...))
	tx.Commit()
	return g
}

// TestTagRegion sleeps a region its owner made, in each mode: the owner's changes are
// refused while it sleeps, its bytes come back, and it is the owner's again after.
func TestTagRegion(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		t.Run(mode.String(), func(t *testing.T) {
			s, m := h200(t)
			g := ownRegion(t, m, vmm.DeviceProps(0), 3)
			want := pattern.Bytes(5, int(g.Size()))
			_, err := g.WriteAt(want, 0)
			require.NoError(t, err)
			p := sleep.New(m, sleep.Options{})
			require.NoError(t, p.Tag("weights", g))
			require.ErrorIs(t, p.Tag("again", g), vmm.ErrInvalid, "a region is tagged once")

			before := s.Stats().Committed[0]
			require.NoError(t, p.Sleep(ctx, "weights", mode))
			require.Equal(t, before-g.Size(), s.Stats().Committed[0])
			_, err = m.Begin(nil).Remove(g, 0, 2*mib)
			require.ErrorIs(t, err, vmm.ErrAsleep, "the owner cannot change a sleeping region")
			require.ErrorIs(t, p.Untag(g), vmm.ErrAsleep)
			buf := make([]byte, 16)
			_, err = g.ReadAt(buf, 0)
			if mode == sleep.Park {
				require.NoError(t, err)
				require.Equal(t, want[:16], buf)
			} else {
				require.ErrorIs(t, err, vmm.ErrAsleep)
			}

			require.NoError(t, p.Wake(ctx, "weights"))
			got := make([]byte, g.Size())
			_, err = g.ReadAt(got, 0)
			require.NoError(t, err)
			if mode == sleep.Discard {
				require.Equal(t, make([]byte, len(got)), got)
			} else {
				require.Equal(t, want, got)
			}
			// Awake, the region is its owner's: it changes, and what it holds then sleeps.
			tx := m.Begin(nil)
			gone, err := tx.Remove(g, 4*mib, 2*mib)
			require.NoError(t, err)
			tx.Commit()
			require.NoError(t, gone[0].Alloc.Close())
			require.NoError(t, p.Sleep(ctx, "weights", mode))
			state := map[sleep.Mode]sleep.State{sleep.Offload: sleep.Offloaded, sleep.Park: sleep.Parked, sleep.Discard: sleep.Discarded}[mode]
			require.Equal(t, map[sleep.State]uint64{state: 4 * mib}, p.States("weights"))
			require.NoError(t, p.Wake(ctx, "weights"))
			require.NoError(t, p.Untag(g))
			require.NoError(t, g.Close())
			require.NoError(t, p.Close())
			require.True(t, s.Stats().Clean(), "%+v", s.Stats())
		})
	}
}

// TestTagBuffer sleeps a growable buffer: Grow is refused while it sleeps; it grows after
// the wake, moving to a new base, and what it holds then sleeps and wakes intact.
func TestTagBuffer(t *testing.T) {
	ctx := context.Background()
	s, m := h200(t)
	b, err := buffer.New(m, 6*mib, buffer.Options{Reserve: 8 * mib, Policy: buffer.Exact})
	require.NoError(t, err)
	want := pattern.Bytes(4, 6*mib)
	_, err = b.WriteAt(want, 0)
	require.NoError(t, err)
	p := sleep.New(m, sleep.Options{})
	require.NoError(t, p.Tag("weights", b))
	require.NoError(t, p.Sleep(ctx, "weights", sleep.Offload))
	require.ErrorIs(t, b.Grow(8*mib), vmm.ErrAsleep)
	require.NoError(t, p.Wake(ctx, "weights"))

	// Past its reservation, with the range after it taken (by the pool's staging range for
	// the copies, or else here): the buffer moves, and the tag follows it.
	growMoving(t, m, b, 14*mib) // to 20 MiB
	more := pattern.Bytes(6, 14*mib)
	_, err = b.WriteAt(more, 6*mib)
	require.NoError(t, err)
	want = append(want, more...)
	before := s.Stats().Committed[0]
	require.NoError(t, p.Sleep(ctx, "weights", sleep.Offload))
	require.Equal(t, before-20*mib, s.Stats().Committed[0], "every chunk sleeps, the new ones too")
	require.NoError(t, p.Wake(ctx, "weights"))
	got := make([]byte, len(want))
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, b.Shrink(2*mib)) // keeps the first chunk, 6 MiB
	require.NoError(t, p.Sleep(ctx, "weights", sleep.Discard))
	require.Equal(t, map[sleep.State]uint64{sleep.Discarded: 6 * mib}, p.States("weights"))
	require.NoError(t, p.Wake(ctx, "weights"))
	require.NoError(t, p.Close())
	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// TestTagSparse sleeps a sparse array's committed pages and wakes them.
func TestTagSparse(t *testing.T) {
	ctx := context.Background()
	s, m := h200(t)
	a, err := sparse.New(m, 64*mib, sparse.Options{})
	require.NoError(t, err)
	want := pattern.Bytes(9, 3*mib)
	_, err = a.WriteAt(want, 10*mib)
	require.NoError(t, err)
	p := sleep.New(m, sleep.Options{})
	require.NoError(t, p.Tag("kv", a))
	require.NoError(t, p.Sleep(ctx, "kv", sleep.Offload))
	require.ErrorIs(t, a.Commit(0, 2*mib), vmm.ErrAsleep)
	_, err = a.ReadAt(make([]byte, 8), 10*mib)
	require.ErrorIs(t, err, vmm.ErrAsleep)
	require.NoError(t, p.Wake(ctx, "kv"))
	got := make([]byte, len(want))
	_, err = a.ReadAt(got, 10*mib)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, a.Commit(0, 2*mib))
	require.NoError(t, p.Close())
	require.NoError(t, a.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// TestTagRefusesShared: exported memory cannot be tagged, nor sleep once exported.
func TestTagRefusesShared(t *testing.T) {
	s, m := h200(t)
	shareable := vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
	g := ownRegion(t, m, shareable, 2)
	p := sleep.New(m, sleep.Options{})
	require.NoError(t, p.Tag("t", g))
	fd, err := g.Chunks(0, g.Size())[1].Alloc.ExportFD()
	require.NoError(t, err)
	require.NoError(t, os.NewFile(uintptr(fd), "exported").Close()) // a handle on Windows
	err = p.Sleep(context.Background(), "t", sleep.Offload)
	require.ErrorIs(t, err, sleep.ErrShared)
	require.Equal(t, map[sleep.State]uint64{sleep.Resident: g.Size()}, p.States("t"), "nothing slept")
	require.NoError(t, p.Untag(g))
	err = p.Tag("t", g)
	require.ErrorIs(t, err, sleep.ErrShared)
	require.ErrorContains(t, err, "+2MiB")

	// Nor memory of the host. A region without chunks is tagged, and sleeps as nothing.
	host := ownRegion(t, m, vmm.Props{Location: vmm.OnHost()}, 1)
	err = p.Tag("t", host)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorContains(t, err, "not of a device")
	require.NoError(t, host.Close())
	empty, err := m.NewRegion(2*mib, 0)
	require.NoError(t, err)
	require.NoError(t, p.Tag("t", empty))
	require.NoError(t, p.Sleep(context.Background(), "t", sleep.Offload))
	require.Empty(t, p.States("t"))
	require.NoError(t, empty.Close())
	require.NoError(t, g.Close())
	require.NoError(t, p.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// TestTagWakeKeepsProps: a woken chunk is memory made as the owner made it (here
// exportable as a descriptor), not plain device memory.
func TestTagWakeKeepsProps(t *testing.T) {
	s, m := h200(t)
	shareable := vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
	g := ownRegion(t, m, shareable, 2)
	p := sleep.New(m, sleep.Options{})
	require.NoError(t, p.Tag("t", g))
	require.NoError(t, p.Sleep(context.Background(), "t", sleep.Discard))
	require.NoError(t, p.Wake(context.Background(), "t"))
	for _, c := range g.Chunks(0, g.Size()) {
		got, err := c.Alloc.Props()
		require.NoError(t, err)
		require.Equal(t, shareable, got)
	}
	fd, err := g.Chunks(0, g.Size())[0].Alloc.ExportFD()
	require.NoError(t, err)
	require.NoError(t, os.NewFile(uintptr(fd), "exported").Close())
	require.NoError(t, p.Close())
	require.NoError(t, g.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// A pool takes no memory of another backend: its copies and releases would work on what
// its own backend has at those addresses, and the memory's bytes would be lost.
func TestTagRefusesAnotherBackend(t *testing.T) {
	s1, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	s2, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	m2 := vmm.New(s2)
	g, err := m2.NewRegion(2<<20, 0)
	require.NoError(t, err)
	defer g.Close()
	a, err := m2.Create(2<<20, vmm.DeviceProps(0))
	require.NoError(t, err)
	tx := m2.Begin(nil)
	require.NoError(t, tx.Add(g, 0, vmm.ReadWrite(0), a))
	tx.Commit()
	p := sleep.New(vmm.New(s1), sleep.Options{})
	defer p.Close()
	err = p.Tag("w", g)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorContains(t, err, "another backend")
	require.ErrorIs(t, p.Sleep(context.Background(), "w", sleep.Offload), vmm.ErrInvalid, "nothing is tagged")
}

// twice is a Memory that lists one region twice.
type twice struct{ g *vmm.Region }

func (d twice) Regions() []*vmm.Region { return []*vmm.Region{d.g, d.g} }

// Tag refuses a Memory that lists a region twice: Sleep would move each of its chunks
// twice, at once.
func TestTagRefusesARegionListedTwice(t *testing.T) {
	_, m := h200(t)
	g, err := m.NewRegion(4*mib, 0)
	require.NoError(t, err)
	defer g.Close()
	p := sleep.New(m, sleep.Options{})
	defer p.Close()
	err = p.Tag("t", twice{g})
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorContains(t, err, "twice")
	require.NoError(t, p.Tag("t", g), "nothing was left tagged")
}
