package cu

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dropDriver models what the driver keeps per allocation, handle references and mappings,
// and fails the test on what corrupts the real driver's heap (bench/c/droprace.c): an unmap
// that frees an allocation while another drop of it (an unmap or a release) is in flight.
type dropDriver struct {
	t      testing.TB
	mu     sync.Mutex
	allocs map[uint64]*dropAlloc
	at     map[uint64]uint64 // mapped start -> allocation
	size   map[uint64]uint64 // mapped start -> size
	next   uint64
	frees  atomic.Int64
}

type dropAlloc struct {
	refs, maps       int
	unmaps, releases int // drops in flight
}

func newDropDriverAlloc() *dropAlloc { return &dropAlloc{refs: 1} }

func newDropDriver(t testing.TB) *dropDriver {
	return &dropDriver{t: t, allocs: map[uint64]*dropAlloc{}, at: map[uint64]uint64{}, size: map[uint64]uint64{}, next: 0x7f0000200000}
}

func (d *dropDriver) create() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next += 0x40
	d.allocs[d.next] = newDropDriverAlloc()
	return d.next
}

func (d *dropDriver) alloc(v uint64) *dropAlloc {
	a := d.allocs[v]
	if a == nil || a.refs == 0 && a.maps == 0 {
		d.t.Errorf("driver got value %#x of no allocation: the real driver would crash", v)
		return &dropAlloc{}
	}
	return a
}

// drop brackets one drop: the body runs with the driver's lock released (as the real
// driver runs calls of several threads at once). Two drops in flight at once that together
// free the allocation, one of them an unmap, is what corrupts the real driver.
func (d *dropDriver) drop(v uint64, unmap bool, apply func(*dropAlloc)) {
	d.mu.Lock()
	a := d.alloc(v)
	inflight := a.unmaps + a.releases
	if inflight > 0 && a.refs+a.maps-(inflight+1) <= 0 && (unmap || a.unmaps > 0) {
		d.t.Errorf("allocation %#x: an unmap that may free it runs alongside another drop: the real driver corrupts its heap", v)
	}
	if unmap {
		a.unmaps++
	} else {
		a.releases++
	}
	d.mu.Unlock()
	time.Sleep(20 * time.Microsecond) // a driver call takes this long: room for another drop to start
	d.mu.Lock()
	if unmap {
		a.unmaps--
	} else {
		a.releases--
	}
	apply(a)
	if a.refs == 0 && a.maps == 0 {
		d.frees.Add(1)
	}
	d.mu.Unlock()
}

func (d *dropDriver) release(v uint64) error {
	d.drop(v, false, func(a *dropAlloc) { a.refs-- })
	return nil
}

func (d *dropDriver) mapAt(start, size, v uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.alloc(v).maps++
	d.at[start], d.size[start] = v, size
	return nil
}

func (d *dropDriver) unmap(start, size uint64) error {
	d.mu.Lock()
	v, ok := d.at[start]
	if !ok || d.size[start] != size {
		d.mu.Unlock()
		return ERROR_INVALID_VALUE
	}
	delete(d.at, start)
	delete(d.size, start)
	d.mu.Unlock()
	d.drop(v, true, func(a *dropAlloc) { a.maps-- })
	return nil
}

func (d *dropDriver) retain(addr uint64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for start, v := range d.at {
		if addr-start < d.size[start] {
			d.alloc(v).refs++
			return v, nil
		}
	}
	return 0, ERROR_INVALID_VALUE
}

// mapHandle is MemMap's steps around the fake driver's map.
func mapHandle(t *handleTable, d *dropDriver, h MemHandle, start, size uint64) error {
	return mapHandleThen(t, d, h, start, size, nil)
}

// mapHandleThen is mapHandle calling between, if not nil, after the driver's map and before
// the record: where another goroutine's call can land in a real MemMap.
func mapHandleThen(t *handleTable, d *dropDriver, h MemHandle, start, size uint64, between func()) error {
	s, drv, err := t.pin(h)
	if err != nil {
		return err
	}
	err = d.mapAt(start, size, drv)
	if between != nil {
		between()
	}
	if err != nil {
		s.unpin()
		return err
	}
	t.mapped(s, h, start, size)
	return nil
}

// recorded counts the mapping records.
func (t *handleTable) recorded() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.maps)
		sh.mu.Unlock()
	}
	return n
}

// recordAt records a mapping of slot idx without a handle or a driver, for the lookups'
// tests.
func (t *handleTable) recordAt(start, size uint64, idx uint32) {
	sh := t.shard(start)
	sh.mu.Lock()
	if sh.maps == nil {
		sh.maps = map[uint64]mapping{}
	}
	sh.maps[start] = mapping{size: size, idx: idx}
	sh.mu.Unlock()
}

func unmapRange(t *handleTable, d *dropDriver, start, size uint64) error {
	return t.unmap(start, size, func() error { return d.unmap(start, size) })
}

func retainAt(t *handleTable, d *dropDriver, addr uint64) (MemHandle, error) {
	h, _, err := t.retainAt(addr, func() (uint64, error) { return d.retain(addr) })
	return h, err
}

const g2 = 2 << 20

// TestDropsOfOneAllocationNeverRace runs, from pairs of goroutines, the patterns that crash
// the real driver when two threads do them at once (stress3 modes F and G of
// bench/c/droprace.c: two unmaps of which one frees, the last unmap with the last release),
// and the harmless ones around them; the fake driver fails the test if cu lets a freeing
// unmap run alongside another drop.
func TestDropsOfOneAllocationNeverRace(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	const pairs, rounds = 4, 300
	var wg sync.WaitGroup
	for p := range pairs {
		base := uint64(0x10000000000) + uint64(p)*0x100000000
		vx, vy := base, base+g2
		wg.Go(func() {
			for i := range rounds {
				h, err := tab.add(d.create())
				if err != nil {
					t.Error(err)
					return
				}
				if err := mapHandle(tab, d, h, vx, g2); err != nil {
					t.Error(err)
					return
				}
				if err := mapHandle(tab, d, h, vy, g2); err != nil {
					t.Error(err)
					return
				}
				var inner sync.WaitGroup
				start := make(chan struct{}) // the two drops start together
				go func() { time.Sleep(time.Microsecond); close(start) }()
				switch i % 3 {
				case 0: // F: the handle released, both mappings unmapped at once
					if err := tab.release(h, d.release); err != nil {
						t.Error(err)
					}
					inner.Go(func() { <-start; require.NoError(t, unmapRange(tab, d, vx, g2)) })
					inner.Go(func() { <-start; require.NoError(t, unmapRange(tab, d, vy, g2)) })
				case 1: // G: the last unmap and the last release at once
					require.NoError(t, unmapRange(tab, d, vy, g2))
					inner.Go(func() { <-start; require.NoError(t, unmapRange(tab, d, vx, g2)) })
					inner.Go(func() { <-start; require.NoError(t, tab.release(h, d.release)) })
				case 2: // a retain that revives the released allocation, racing the unmaps
					if err := tab.release(h, d.release); err != nil {
						t.Error(err)
					}
					inner.Go(func() {
						<-start
						if r, err := retainAt(tab, d, vx+4096); err == nil {
							require.NoError(t, tab.release(r, d.release))
						}
						require.NoError(t, unmapRange(tab, d, vx, g2))
					})
					inner.Go(func() { <-start; require.NoError(t, unmapRange(tab, d, vy, g2)) })
				}
				inner.Wait()
			}
		})
	}
	wg.Wait()
	n, refs := tab.live()
	require.Zero(t, n, "handles leaked")
	require.Zero(t, refs)
	require.Zero(t, tab.recorded(), "mapping records leaked")
	d.mu.Lock()
	defer d.mu.Unlock()
	for v, a := range d.allocs {
		require.False(t, a.refs > 0 || a.maps > 0, "allocation %#x leaked: %+v", v, *a)
	}
	require.EqualValues(t, pairs*rounds, d.frees.Load(), "every allocation freed")
}

func TestRetainRevivesAReleasedMapping(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	v := d.create()
	h, err := tab.add(v)
	require.NoError(t, err)
	require.NoError(t, mapHandle(tab, d, h, 0x20000000000, g2))
	require.NoError(t, tab.release(h, d.release))
	require.False(t, tab.known(h), "released")
	r, err := retainAt(tab, d, 0x20000000000+100)
	require.NoError(t, err)
	require.NotEqual(t, h, r, "a revived handle has a new value")
	require.Equal(t, uint32(h), uint32(r), "in the same slot")
	_, drv, err := tab.pin(r)
	require.NoError(t, err)
	require.Equal(t, v, drv)
	tab.slot(uint32(r)).unpin()
	require.NoError(t, tab.release(r, d.release))
	require.NoError(t, unmapRange(tab, d, 0x20000000000, g2))
	n, _ := tab.live()
	require.Zero(t, n)
	require.Zero(t, tab.recorded())
}

func TestUnmapOfSeveralMappings(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	base := uint64(0x30000000000)
	var hs []MemHandle
	for i := range 3 {
		h, err := tab.add(d.create())
		require.NoError(t, err)
		require.NoError(t, mapHandle(tab, d, h, base+uint64(i)*g2, g2))
		hs = append(hs, h)
	}
	for _, h := range hs {
		require.NoError(t, tab.release(h, d.release))
	}
	// One unmap over the three (the fake driver does one at a time; cu must find all three).
	err := tab.unmap(base, 3*g2, func() error {
		for i := range 3 {
			if err := d.unmap(base+uint64(i)*g2, g2); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Zero(t, tab.recorded())
	n, _ := tab.live()
	require.Zero(t, n)
	for i := range 3 {
		require.True(t, tab.slot(uint32(hs[i])).maps.Load() == 0)
	}
}

func TestFailedUnmapKeepsTheRecords(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	h, err := tab.add(d.create())
	require.NoError(t, err)
	require.NoError(t, mapHandle(tab, d, h, 0x40000000000, g2))
	err = tab.unmap(0x40000000000, g2, func() error { return ERROR_INVALID_VALUE })
	require.True(t, errors.Is(err, ERROR_INVALID_VALUE))
	require.Equal(t, 1, tab.recorded())
	require.NoError(t, tab.release(h, d.release))
	require.NoError(t, unmapRange(tab, d, 0x40000000000, g2))
	n, _ := tab.live()
	require.Zero(t, n)
}

func TestMappingLookups(t *testing.T) {
	tab := new(handleTable)
	const base = 0x1000000000
	tab.recordAt(base, 4*g2, 7)
	tab.recordAt(base+4*g2, g2, 8)
	e, ok := tab.containing(base + 3*g2 + 5)
	require.True(t, ok)
	require.EqualValues(t, 7, e.idx)
	require.EqualValues(t, base, e.start)
	e, ok = tab.containing(base + 4*g2)
	require.True(t, ok)
	require.EqualValues(t, 8, e.idx)
	_, ok = tab.containing(base + 5*g2)
	require.False(t, ok)
	_, ok = tab.containing(0x100)
	require.False(t, ok)
	require.Len(t, tab.lookup(base, base+5*g2, nil), 2, "two mappings that follow each other")
	require.Equal(t, 2, tab.recorded(), "a lookup removes nothing")
	require.Len(t, tab.lookup(base+4*g2, base+5*g2, nil), 1, "one mapping, exactly")
	require.Empty(t, tab.lookup(0x2000000000, 0x2000000000+1<<40, nil))

	// A gap, then mappings past it (in slot order), and one that starts before the range.
	tab.recordAt(base+9*g2, 2*g2, 9)
	tab.recordAt(base+6*g2, g2, 10)
	es := tab.lookup(base+5*g2, base+12*g2, nil)
	require.Len(t, es, 2, "the mapping that starts before the range is not in it")
	require.Equal(t, []uint64{base + 9*g2, base + 6*g2}, []uint64{es[0].start, es[1].start})
}
