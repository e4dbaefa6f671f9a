package sleep_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
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

type owner interface {
	sleep.Memory
	ReadAt([]byte, int64) (int, error)
	Close() error
}

// TestTaggedFaults fails each driver operation's nth call during a sleep, or during a wake,
// of a tagged buffer and a tagged sparse array in each mode: a retry sleeps, the wake gives
// every byte back, and nothing leaks. (Written by a hostile review, kept.)
func TestTaggedFaults(t *testing.T) {
	ctx := context.Background()
	ops := []sim.Op{sim.OpCreate, sim.OpRelease, sim.OpReserve, sim.OpMap, sim.OpUnmap, sim.OpSetAccess, sim.OpCopyDtoD, sim.OpMemsetD8, sim.OpProperties, sim.OpGranularity, sim.OpFree}
	for _, kind := range []string{"buffer", "sparse"} {
		for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
			for _, op := range ops {
				for n := 1; n <= 4; n++ {
					for _, during := range []string{"sleep", "wake"} {
						name := fmt.Sprintf("%s/%v/%v/%d/%s", kind, mode, op, n, during)
						t.Run(name, func(t *testing.T) {
							s, m := h200(t)
							want := pattern.Bytes(3, 6*mib)
							var o owner
							if kind == "buffer" {
								b, err := buffer.New(m, 6*mib, buffer.Options{Policy: buffer.Exact, MaxChunk: 2 * mib})
								require.NoError(t, err)
								for off := uint64(0); off < 6*mib; off += 2 * mib { // three chunks
									require.NoError(t, b.Grow(off+2*mib))
								}
								o = b
								_, err = b.WriteAt(want, 0)
								require.NoError(t, err)
							} else {
								a, err := sparse.New(m, 64*mib, sparse.Options{})
								require.NoError(t, err)
								o = a
								_, err = a.WriteAt(want, 0)
								require.NoError(t, err)
							}
							if mode == sleep.Discard {
								want = make([]byte, len(want))
							}
							p := sleep.New(m, sleep.Options{})
							require.NoError(t, p.Tag("t", o))
							if during == "wake" {
								require.NoError(t, p.Sleep(ctx, "t", mode))
							}
							require.NoError(t, s.FailNth(op, n, cu.ERROR_UNKNOWN))
							var err error
							if during == "sleep" {
								err = p.Sleep(ctx, "t", mode)
							} else {
								err = p.Wake(ctx, "t")
							}
							s.ClearFaults()
							if during == "sleep" {
								require.NoError(t, p.Sleep(ctx, "t", mode), "the retry (after %v)", err)
							}
							require.NoError(t, p.Wake(ctx, "t"), "the wake (after %v)", err)
							got := make([]byte, len(want))
							_, rerr := o.ReadAt(got, 0)
							require.NoError(t, rerr, "after %v", err)
							require.True(t, bytes.Equal(want, got), "the bytes, after %v", err)
							require.NoError(t, p.Untag(o), "untag after %v", err)
							require.NoError(t, p.Close())
							require.NoError(t, o.Close())
							require.True(t, s.Stats().Clean(), "%+v after %v", s.Stats(), err)
						})
					}
				}
			}
		}
	}
}

// twoRegions is memory of two regions, a pointer (comparable).
type twoRegions struct{ gs []*vmm.Region }

func (r *twoRegions) Regions() []*vmm.Region { return r.gs }

// An Untag that fails on its second region leaves both tagged, and the tag sleeps, wakes and
// untags again; nothing leaks.
func TestRegressUntagPartialFailure(t *testing.T) {
	ctx := context.Background()
	s, m := h200(t)
	mem := &twoRegions{[]*vmm.Region{ownRegion(t, m, vmm.DeviceProps(0), 1), ownRegion(t, m, vmm.DeviceProps(0), 1)}}
	p := sleep.New(m, sleep.Options{})
	require.NoError(t, p.Tag("t", mem))
	require.NoError(t, p.Prepare("t"))                                // both regions get a stage with one host chunk
	require.NoError(t, s.FailNth(sim.OpRelease, 2, cu.ERROR_UNKNOWN)) // the second stage's host chunk
	require.ErrorIs(t, p.Untag(mem), cu.ERROR_UNKNOWN)
	s.ClearFaults()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park} {
		require.NoError(t, p.Sleep(ctx, "t", mode))
		require.NoError(t, p.Wake(ctx, "t"))
	}
	require.NoError(t, p.Untag(mem))
	require.NoError(t, p.Close())
	for _, g := range mem.gs {
		require.NoError(t, g.Close())
	}
	require.True(t, s.Stats().Clean(), "leak: %+v", s.Stats())
}

// Pool.Close wakes tagged memory before it releases its host memory: the owner gets it back
// with its bytes.
func TestRegressPoolCloseWakesTagged(t *testing.T) {
	ctx := context.Background()
	s, m := h200(t)
	b, err := buffer.New(m, 4*mib, buffer.Options{Policy: buffer.Exact})
	require.NoError(t, err)
	want := pattern.Bytes(1, 4*mib)
	_, err = b.WriteAt(want, 0)
	require.NoError(t, err)
	p := sleep.New(m, sleep.Options{})
	require.NoError(t, p.Tag("w", b))
	require.NoError(t, p.Sleep(ctx, "w", sleep.Offload))
	// A wake that cannot happen keeps the pool open and the bytes asleep.
	require.NoError(t, s.FailNth(sim.OpCreate, 1, cu.ERROR_OUT_OF_MEMORY))
	require.ErrorIs(t, p.Close(), cu.ERROR_OUT_OF_MEMORY)
	s.ClearFaults()
	require.NoError(t, p.Close())
	got := make([]byte, len(want))
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, b.Shrink(0), "the buffer is its owner's again")
	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Memory bound to a multicast object is shared: Tag refuses it.
func TestRegressMulticastBoundIsShared(t *testing.T) {
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	m := vmm.New(s)
	props := vmm.MulticastProps{Devices: 2}
	props.Size, err = m.MulticastGranularity(props, true)
	require.NoError(t, err)
	mc, err := m.CreateMulticast(props)
	require.NoError(t, err)
	require.NoError(t, mc.AddDevice(0))
	require.NoError(t, mc.AddDevice(1))
	g := ownRegion(t, m, vmm.DeviceProps(0), int(props.Size/(2*mib)))
	for _, c := range g.Chunks(0, g.Size()) {
		require.NoError(t, mc.Bind(c.Off, c.Alloc, 0, c.Size))
	}
	p := sleep.New(m, sleep.Options{})
	require.ErrorIs(t, p.Tag("w", g), sleep.ErrShared)
	require.NoError(t, mc.Close())
	require.NoError(t, g.Close())
	require.NoError(t, p.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// A buffer that moved is still the memory tagged: a second Tag is refused, and the tag
// sleeps and wakes what it holds now.
func TestRegressTagTwiceAfterMove(t *testing.T) {
	ctx := context.Background()
	s, m := h200(t)
	b, err := buffer.New(m, 4*mib, buffer.Options{Reserve: 4 * mib, Policy: buffer.Exact})
	require.NoError(t, err)
	want := pattern.Bytes(2, 6*mib)
	p := sleep.New(m, sleep.Options{})
	require.NoError(t, p.Tag("w", b))
	growMoving(t, m, b, 2*mib) // to 6 MiB
	_, err = b.WriteAt(want, 0)
	require.NoError(t, err)
	require.ErrorIs(t, p.Tag("w", b), vmm.ErrInvalid)
	require.ErrorIs(t, p.Tag("other", b.Regions()[0]), vmm.ErrInvalid, "nor its region under another tag")
	require.NoError(t, p.Sleep(ctx, "w", sleep.Offload))
	require.NoError(t, p.Wake(ctx, "w"))
	got := make([]byte, len(want))
	_, err = b.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, p.Close())
	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// A sleeping buffer refuses to grow (into a new reservation too), to move and to export; a
// sleeping array refuses to export.
func TestRegressAsleepRefusesChanges(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		s, m := h200(t)
		a, err := sparse.New(m, 8*mib, sparse.Options{})
		require.NoError(t, err)
		require.NoError(t, a.Commit(0, 2*mib))
		b, err := buffer.New(m, 2*mib, buffer.Options{Reserve: 2 * mib})
		require.NoError(t, err)
		p := sleep.New(m, sleep.Options{})
		require.NoError(t, p.Tag("t", a))
		require.NoError(t, p.Tag("t", b))
		require.NoError(t, p.Sleep(ctx, "t", mode))
		before := s.Stats().Committed[0]
		require.ErrorIs(t, b.Grow(8*mib), vmm.ErrAsleep, "%v", mode)
		require.ErrorIs(t, b.Shrink(0), vmm.ErrAsleep, "%v", mode)
		require.Equal(t, before, s.Stats().Committed[0])
		if runtime.GOOS == "linux" {
			_, err = a.ExportDmaBuf(0, 2*mib)
			require.ErrorIs(t, err, vmm.ErrAsleep, "%v", mode)
			_, err = b.ExportDmaBuf()
			require.ErrorIs(t, err, vmm.ErrAsleep, "%v", mode)
		}
		require.NoError(t, p.Close())
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	}
}

type regions []*vmm.Region

func (r regions) Regions() []*vmm.Region { return r }

// Memory of a type that cannot be compared is refused, not a panic at Untag.
func TestRegressTagUncomparable(t *testing.T) {
	_, m := h200(t)
	g := ownRegion(t, m, vmm.DeviceProps(0), 1)
	p := sleep.New(m, sleep.Options{})
	require.ErrorIs(t, p.Tag("w", regions{g}), vmm.ErrInvalid)
	require.NotPanics(t, func() { _ = p.Untag(regions{g}) })
	require.NoError(t, g.Close())
}
