package vmm_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addRun is one transaction: n chunks of 2 MiB created and added at off.
func addRun(m *vmm.Manager, g *vmm.Region, off uint64, n int) error {
	tx := m.Begin(nil)
	allocs := make([]*vmm.Allocation, n)
	for i := range allocs {
		a, err := tx.Create(2*mib, vmm.DeviceProps(0))
		if err != nil {
			return tx.Rollback(err)
		}
		allocs[i] = a
	}
	if err := tx.Add(g, off, vmm.ReadWrite(0), allocs...); err != nil {
		return tx.Rollback(err)
	}
	tx.Commit()
	return nil
}

func TestRegionAddRemoveClose(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	g, err := m.NewRegion(16*mib, 0)
	require.NoError(t, err)
	require.NoError(t, addRun(m, g, 0, 3))
	require.NoError(t, addRun(m, g, 8*mib, 2))
	require.Equal(t, uint64(10*mib), g.Used())
	cs := g.Chunks(0, g.Size())
	require.Len(t, cs, 5)
	for i, want := range []uint64{0, 2 * mib, 4 * mib, 8 * mib, 10 * mib} {
		require.Equal(t, want, cs[i].Off)
	}
	require.Len(t, g.Chunks(5*mib, 4*mib), 2, "a range that touches two chunks lists both")
	require.Len(t, g.Chunks(3*mib, math.MaxUint64), 4, "a range to the end of the address space")

	want := bytes.Repeat([]byte{7}, int(6*mib))
	_, err = g.WriteAt(want, 0)
	require.NoError(t, err)

	// Removing splits nothing; a range cutting a chunk is refused before the driver.
	_, err = m.Begin(nil).Remove(g, mib, 2*mib)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = m.Begin(nil).Remove(g, 2*mib, math.MaxUint64)
	require.ErrorIs(t, err, vmm.ErrOutOfRange, "a range past the region, whose end wraps")
	tx := m.Begin(nil)
	gone, err := tx.Remove(g, 2*mib, 6*mib)
	require.NoError(t, err)
	require.Len(t, gone, 2)
	require.Equal(t, uint64(6*mib), g.Used())
	// Rolled back, the chunks are mapped again with their bytes.
	require.Error(t, tx.Rollback(errors.New("undo")))
	require.Equal(t, uint64(10*mib), g.Used())
	got := make([]byte, len(want))
	_, err = g.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Committed, they are the caller's.
	tx = m.Begin(nil)
	gone, err = tx.Remove(g, 8*mib, 8*mib)
	require.NoError(t, err)
	tx.Commit()
	for _, c := range gone {
		require.NoError(t, c.Alloc.Close())
	}
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "Close is idempotent")
	_, err = g.ReadAt(got[:1], 0)
	require.ErrorIs(t, err, vmm.ErrClosed)
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// TestRegionAddFaults fails each driver call of an Add in turn: nothing stays mapped or
// allocated, and the region's list is unchanged.
func TestRegionAddFaults(t *testing.T) {
	for _, op := range []sim.Op{sim.OpCreate, sim.OpMap, sim.OpSetAccess} {
		for nth := 1; nth <= 3; nth++ {
			s := newSim(t)
			m := vmm.New(s)
			g, err := m.NewRegion(8*mib, 0)
			require.NoError(t, err)
			require.NoError(t, s.FailNth(op, nth, cu.ERROR_OUT_OF_MEMORY))
			err = addRun(m, g, 0, 3)
			if op == sim.OpSetAccess && nth > 1 {
				require.NoError(t, err)
				require.NoError(t, g.Close())
				continue
			}
			require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY, "%s #%d", op, nth)
			require.Empty(t, g.Chunks(0, g.Size()))
			st := s.Stats()
			require.Zero(t, st.Mappings, "%s #%d", op, nth)
			require.Zero(t, st.Allocations, "%s #%d", op, nth)
			require.NoError(t, g.Close())
			require.True(t, s.Stats().Clean())
		}
	}
}

// TestRegionRemoveRestoreFails: when mapping removed chunks back fails, the rollback
// reports ErrBroken, and the region keeps every removed chunk for its Close, those of the
// runs put back before the failure too.
func TestRegionRemoveRestoreFails(t *testing.T) {
	for nth := 1; nth <= 3; nth++ { // two runs, of two chunks and one: the put-back maps 3
		s := newSim(t)
		m := vmm.New(s)
		g, err := m.NewRegion(16*mib, 0)
		require.NoError(t, err)
		require.NoError(t, addRun(m, g, 0, 2))
		require.NoError(t, addRun(m, g, 8*mib, 1))
		var p vmm.Pending
		tx := m.Begin(&p)
		_, err = tx.Remove(g, 0, 16*mib)
		require.NoError(t, err)
		require.NoError(t, s.FailNth(sim.OpMap, nth, cu.ERROR_OUT_OF_MEMORY))
		require.ErrorIs(t, tx.Rollback(errors.New("undo")), vmm.ErrBroken, "map #%d", nth)
		require.ErrorIs(t, p.Broken(), vmm.ErrBroken)
		require.Len(t, g.Chunks(0, g.Size()), 3, "map #%d: the region keeps what it could not map back, for Close", nth)
		require.NoError(t, g.Close())
		require.True(t, s.Stats().Clean(), "map #%d: %+v", nth, s.Stats())
	}
}

func TestRegionNilAndZero(t *testing.T) {
	var g *vmm.Region
	require.Zero(t, g.Base())
	require.Zero(t, g.Size())
	require.Nil(t, g.Chunks(0, 1))
	_, err := g.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorIs(t, g.Close(), vmm.ErrInvalid)
	require.ErrorIs(t, vmm.New(nil).Begin(nil).Add(&vmm.Region{}, 0, nil), vmm.ErrInvalid)
	_, err = vmm.New(nil).NewRegion(2*mib, 0)
	require.ErrorIs(t, err, vmm.ErrInvalid)
}

// gate is the simulator with a Map that can be held, to run a change of a region while a
// Swap of it is in a driver call.
type gate struct {
	*sim.Sim
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gate) Map(ptr cu.DevicePtr, size, offset uint64, h cu.MemHandle, flags uint64) error {
	if g.hold.Swap(false) {
		close(g.entered)
		<-g.release
	}
	return g.Sim.Map(ptr, size, offset, h, flags)
}

// An Add that comes while a Swap is in the driver waits for it: each lands in its own
// chunk, and nothing leaks. (A hostile review found the Swap's result written into the
// Add's chunk.)
func TestRegionSwapAlongsideAdd(t *testing.T) {
	s := newSim(t)
	b := &gate{Sim: s, entered: make(chan struct{}), release: make(chan struct{})}
	m := vmm.New(b)
	g, err := m.NewRegion(16*mib, 0)
	require.NoError(t, err)
	require.NoError(t, addRun(m, g, 8*mib, 1))
	fresh, err := m.Create(2*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	b.hold.Store(true)
	swapped := make(chan *vmm.Allocation)
	go func() {
		old, err := g.Swap(8*mib, fresh, false)
		assert.NoError(t, err)
		swapped <- old
	}()
	<-b.entered
	added := make(chan error)
	go func() { added <- addRun(m, g, 0, 1) }()
	close(b.release)
	old := <-swapped
	require.NoError(t, <-added)
	cs := g.Chunks(0, g.Size())
	require.Len(t, cs, 2)
	require.Equal(t, fresh, cs[1].Alloc, "the swap's memory is at +8 MiB")
	require.NotEqual(t, fresh, cs[0].Alloc)
	require.NoError(t, old.Close())
	require.NoError(t, g.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Swap refuses another backend's allocation before it unmaps anything.
func TestRegionSwapRefusesAnotherBackend(t *testing.T) {
	s := newSim(t)
	m, other := vmm.New(s), vmm.New(newSim(t))
	g, err := m.NewRegion(2*mib, 0)
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, addRun(m, g, 0, 1))
	_, err = g.WriteAt([]byte("hello"), 0)
	require.NoError(t, err)
	f, err := other.Create(2*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer f.Close()
	old, err := g.Swap(0, f, false)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.Nil(t, old)
	got := make([]byte, 5)
	_, err = g.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, "hello", string(got), "the chunk stays mapped")
	require.True(t, g.Manager().SameBackend(m) && !g.Manager().SameBackend(other))
}

// What Chunks and Remove return is the caller's to edit: the region's record of the
// access, which Swap and a Remove's undo map with, stays.
func TestChunksAreCopies(t *testing.T) {
	m := vmm.New(newSim(t))
	g, err := m.NewRegion(4*mib, 0)
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, addRun(m, g, 0, 2))
	cs := g.Chunks(0, g.Size())
	cs[0].Access[0].Flags = cu.MEM_ACCESS_FLAGS_PROT_READ
	require.Equal(t, cu.MEM_ACCESS_FLAGS_PROT_READWRITE, g.Chunks(0, g.Size())[1].Access[0].Flags)
	tx := m.Begin(nil)
	gone, err := tx.Remove(g, 2*mib, 2*mib)
	require.NoError(t, err)
	gone[0].Access[0].Flags = cu.MEM_ACCESS_FLAGS_PROT_READ
	require.NotErrorIs(t, tx.Rollback(errors.New("undo")), vmm.ErrBroken)
	_, err = g.WriteAt([]byte{1}, 2*mib) // mapped back read-write, as recorded
	require.NoError(t, err)
}

// Swap refuses what would leave a chunk awake with nothing mapped, a closed allocation or
// none, before it unmaps anything.
func TestSwapRefusesBeforeItUnmaps(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	g, err := m.NewRegion(2*mib, 0)
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, addRun(m, g, 0, 1))
	dead, err := m.Create(2*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	require.NoError(t, dead.Close())
	mappings := s.Stats().Mappings
	for _, a := range []*vmm.Allocation{dead, nil} {
		old, err := g.Swap(0, a, false)
		require.Nil(t, old)
		require.Error(t, err)
		require.Equal(t, mappings, s.Stats().Mappings, "unmapped")
		require.NotNil(t, g.Chunks(0, g.Size())[0].Alloc)
	}
	_, err = g.ReadAt(make([]byte, 16), 0)
	require.NoError(t, err)
}

// unmapHook is the simulator with a hook run at the start of every Unmap.
type unmapHook struct {
	*sim.Sim
	hook func()
}

func (u *unmapHook) Unmap(p cu.DevicePtr, size uint64) error {
	if u.hook != nil {
		u.hook()
	}
	return u.Sim.Unmap(p, size)
}

// A Close of the allocation Swap maps, begun while Swap unmaps what it replaces, waits for
// the map: the chunk is not left awake with nothing mapped.
func TestSwapHoldsTheAllocationToTheMap(t *testing.T) {
	u := &unmapHook{Sim: newSim(t)}
	m := vmm.New(u)
	g, err := m.NewRegion(2*mib, 0)
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, addRun(m, g, 0, 1))
	a, err := m.Create(2*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	closed := make(chan error, 1)
	u.hook = func() {
		u.hook = nil
		go func() { closed <- a.Close() }()
		time.Sleep(200 * time.Millisecond) // the Close is waiting for Swap's pin by then
	}
	old, err := g.Swap(0, a, false)
	require.NoError(t, err)
	require.NoError(t, old.Close())
	require.NoError(t, <-closed)
	require.NotNil(t, g.Chunks(0, g.Size())[0].Alloc)
	_, err = g.ReadAt(make([]byte, 16), 0)
	require.NoError(t, err)
}

// A read of a sleeping chunk racing the region's Close names that chunk, from what it saw
// under the lock (go test -race: no access to a node Close frees).
func TestCopyAtRacesClose(t *testing.T) {
	m := vmm.New(newSim(t))
	for range 300 {
		g, err := m.NewRegion(4*mib, 0)
		require.NoError(t, err)
		require.NoError(t, addRun(m, g, 0, 2))
		old, err := g.Swap(2*mib, nil, true)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			var err error
			for range 20 {
				if _, e := g.ReadAt(make([]byte, 64), 2*mib); e != nil && !errors.Is(e, vmm.ErrClosed) && !strings.Contains(e.Error(), "the chunk at +2MiB") {
					err = e
				}
			}
			done <- err
		}()
		require.NoError(t, g.Close())
		require.NoError(t, <-done)
		require.NoError(t, old.Close())
	}
}
