package cu

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An unmap racing the map of the same range leaves a record of a mapping the driver no
// longer has; the next map there finds it (mapped's stale record). When that record is the
// handle's own and its last release is draining the handle's pins meanwhile, mapped must
// not wait for the release's drop lock while it still pins the handle.
func TestStaleRecordOfAHandleBeingReleased(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	const at = 0x50000000000
	h, err := tab.add(d.create())
	require.NoError(t, err)
	require.NoError(t, mapHandleThen(tab, d, h, at, g2, func() {
		require.NoError(t, unmapRange(tab, d, at, g2))
	}))
	released := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- mapHandleThen(tab, d, h, at, g2, func() {
			go func() { released <- tab.release(h, d.release) }()
			time.Sleep(20 * time.Millisecond) // the release takes the drop lock and drains
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: mapped waits for the drop lock of a release that waits for mapped's pin")
	}
	require.NoError(t, <-released)
	require.NoError(t, unmapRange(tab, d, at, g2))
	n, _ := tab.live()
	require.Zero(t, n)
}

// An unmap that frees two allocations of one shard, racing creates in that shard: the
// unmap must not hold a freed slot's drop lock while it waits for the shard's lock, which a
// create holds while it waits for that very drop lock (having just taken the slot off the
// free list).
func TestUnmapFreeingTwoRacesCreatesInTheirShard(t *testing.T) {
	tab := new(handleTable)
	var vals []uint64
	for v := uint64(0x1000); len(vals) < 2000; v += 0x40 {
		if tab.shard(v) == tab.shard(0x1000) {
			vals = append(vals, v)
		}
	}
	ok := func(uint64) error { return nil }
	const at = 0x80000000000
	stop, creating := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(creating)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if h, err := tab.add(vals[1000+i%1000]); err == nil {
				_ = tab.release(h, ok)
			}
		}
	}()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := range 20000 {
			hx, _ := tab.add(vals[(2*i)%1000])
			hy, _ := tab.add(vals[(2*i+1)%1000])
			for j, h := range []MemHandle{hx, hy} {
				s, _, _ := tab.pin(h)
				tab.mapped(s, h, at+uint64(j)*g2, g2)
			}
			_ = tab.release(hx, ok)
			_ = tab.release(hy, ok)
			_ = tab.unmap(at, 2*g2, func() error { return nil })
		}
	}()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("deadlock: an unmap and a create of one shard wait for each other")
	}
	close(stop)
	<-creating
	n, _ := tab.live()
	require.Zero(t, n, "every handle released and unmapped")
}

// LiveHandles may run while a create is adding a slot: fresh raises next before the slot's
// page exists.
func TestLiveWhileASlotIsAdded(t *testing.T) {
	tab := new(handleTable)
	tab.next.Store(1)
	n, refs := tab.live()
	require.Zero(t, n+refs)
	tab.next.Store(maxSlots + 1) // fresh past the limit, before it backs off
	n, refs = tab.live()
	require.Zero(t, n+refs)
}

// containing must find the mapping that contains the address when the nearest one that
// starts below it ends before it.
func TestContainingLooksPastAMappingThatEndsBefore(t *testing.T) {
	tab := new(handleTable)
	const base = 0x60000000000
	tab.recordAt(0x70000000000, 64<<20, 9) // a large mapping elsewhere
	tab.recordAt(base, g2, 7)              // [base, base+2 MiB)
	tab.recordAt(base+g2, 3<<20, 8)        // [base+2 MiB, base+5 MiB)
	e, ok := tab.containing(base + 4<<20)
	require.True(t, ok)
	require.EqualValues(t, 8, e.idx)
	e, ok = tab.containing(base + 1<<20)
	require.True(t, ok)
	require.EqualValues(t, 7, e.idx)
	_, ok = tab.containing(base + 5<<20)
	require.False(t, ok)
}

// A retain inside a mapping whose freeing unmap is in the driver must not reach the driver
// until the unmap is done: the driver corrupts its heap when cuMemRetainAllocationHandle
// revives an allocation that a cuMemUnmap running at the same time frees. The unmap's
// driver call blocks here until the test lets it go; the retain must wait for it, then get
// the driver's answer (nothing is mapped there any more).
func TestRetainWaitsForAFreeingUnmap(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	const at = 0x90000000000
	h, err := tab.add(d.create())
	require.NoError(t, err)
	require.NoError(t, mapHandle(tab, d, h, at, g2))
	require.NoError(t, tab.release(h, d.release)) // the mapping holds the allocation alone
	inUnmap, letGo := make(chan struct{}), make(chan struct{})
	unmapped := make(chan error, 1)
	go func() {
		unmapped <- tab.unmap(at, g2, func() error {
			close(inUnmap)
			<-letGo
			return d.unmap(at, g2)
		})
	}()
	<-inUnmap
	entered := make(chan struct{}, 1)
	type retained struct {
		h   MemHandle
		err error
	}
	done := make(chan retained, 1)
	go func() {
		h, _, err := tab.retainAt(at+4096, func() (uint64, error) {
			entered <- struct{}{}
			return d.retain(at + 4096)
		})
		done <- retained{h, err}
	}()
	select {
	case <-entered:
		t.Fatal("the retain reached the driver while the unmap that frees the allocation was in it")
	case <-time.After(100 * time.Millisecond):
	}
	close(letGo)
	require.NoError(t, <-unmapped)
	r := <-done
	require.Len(t, entered, 1, "the retain reached the driver once the unmap was done")
	require.ErrorIs(t, r.err, ERROR_INVALID_VALUE, "the driver's answer: nothing mapped there")
	require.Zero(t, r.h)
	n, refs := tab.live()
	require.Zero(t, n+refs)
	require.Zero(t, tab.recorded())
	require.EqualValues(t, 1, d.frees.Load())
}

// recordAtStart returns the slot of the mapping recorded at start, read straight from its
// shard.
func (t *handleTable) recordAtStart(start uint64) (uint32, bool) {
	sh := t.shard(start)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	m, ok := sh.maps[start]
	return m.idx, ok
}

// Two unmaps of one range, and a map of another handle into the range between them: the
// first unmap's driver call has unmapped the range, a map there has been made and recorded
// (over the first mapping's record, which the first unmap has not removed yet), and the
// second unmap, which looked the range up before, unmaps the new mapping. Each mapping is
// counted gone once, and nothing leaks.
func TestTwoUnmapsOfARangeAndAMapBetween(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	const at = 0xa0000000000
	h1, err := tab.add(d.create())
	require.NoError(t, err)
	h2, err := tab.add(d.create())
	require.NoError(t, err)
	require.NoError(t, mapHandle(tab, d, h1, at, g2))
	require.NoError(t, tab.release(h1, d.release)) // so the unmaps of h1's mapping free it
	inFirst, secondStarted := make(chan struct{}), make(chan struct{})
	mapDone := make(chan error, 1)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() {
		first <- tab.unmap(at, g2, func() error {
			close(inFirst)
			<-secondStarted
			time.Sleep(20 * time.Millisecond) // the second unmap looks the range up meanwhile
			if err := d.unmap(at, g2); err != nil {
				return err
			}
			go func() { mapDone <- mapHandle(tab, d, h2, at, g2) }()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				if idx, ok := tab.recordAtStart(at); ok && idx == uint32(h2) {
					return nil // the map into the range is recorded: the first unmap goes on
				}
				if time.Now().After(deadline) {
					return errors.New("the map into the range was never recorded")
				}
			}
		})
	}()
	<-inFirst
	go func() {
		close(secondStarted)
		second <- tab.unmap(at, g2, func() error { return d.unmap(at, g2) })
	}()
	for _, c := range []chan error{first, mapDone, second} {
		select {
		case err := <-c:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("deadlock: two unmaps of one range and a map between them")
		}
	}
	n, refs := tab.live()
	require.Equal(t, 1, n, "h2 alone")
	require.Equal(t, 1, refs)
	require.Zero(t, tab.recorded(), "both mappings unmapped")
	require.Zero(t, tab.slot(uint32(h2)).maps.Load(), "h2's mapping counted gone once")
	require.True(t, tab.known(h2))
	require.False(t, tab.known(h1))
	require.NoError(t, tab.release(h2, d.release))
	n, refs = tab.live()
	require.Zero(t, n+refs)
	require.EqualValues(t, 2, d.frees.Load(), "both allocations freed")
}

// unmapWithin is the driver's cuMemUnmap as recorded (sim's unmapLocked): every mapping
// inside [start, start+size) goes, the gaps between them are no-ops. Before the driver
// drops a mapping, the test fails unless cu holds that allocation's drop lock.
func (d *dropDriver) unmapWithin(tab *handleTable, start, size uint64) error {
	d.mu.Lock()
	var starts []uint64
	for s, n := range d.size {
		if s < start+size && start < s+n {
			if s < start || s+n > start+size {
				d.mu.Unlock()
				return ERROR_INVALID_VALUE // splits a mapping
			}
			starts = append(starts, s)
		}
	}
	d.mu.Unlock()
	for _, s := range starts {
		d.mu.Lock()
		v := d.at[s]
		d.mu.Unlock()
		sh := tab.shard(v)
		sh.mu.Lock()
		idx, ok := sh.drvs[v]
		sh.mu.Unlock()
		if !ok {
			d.t.Errorf("unmap of [%#x, +%#x) drops allocation %#x, which cu has no slot for", start, size, v)
		} else if l := &tab.slot(idx).drop; l.TryLock() {
			l.Unlock()
			d.t.Errorf("unmap of [%#x, +%#x) drops allocation %#x without its drop lock", start, size, v)
		}
		if err := d.unmap(s, d.size[s]); err != nil {
			return err
		}
	}
	return nil
}

// Two unmaps of one range, the first stopped after its driver call (so its record stays),
// and a map of another allocation inside the range meanwhile: the second unmap's lookup,
// carried past the new mapping by the stale record, must not let the driver unmap the new
// mapping unless it holds that allocation's drop lock and removes its record.
func TestSecondUnmapOfARangeSeesAMappingMadeInside(t *testing.T) {
	tab, d := new(handleTable), newDropDriver(t)
	const at = 0xb0000000000
	hA, err := tab.add(d.create())
	require.NoError(t, err)
	require.NoError(t, mapHandle(tab, d, hA, at, 2*g2))
	hB, err := tab.add(d.create())
	require.NoError(t, err)
	inFirst, letGo := make(chan struct{}), make(chan struct{})
	first, second := make(chan error, 1), make(chan error, 1)
	go func() {
		first <- tab.unmap(at, 2*g2, func() error {
			err := d.unmapWithin(tab, at, 2*g2)
			close(inFirst)
			<-letGo // the driver has unmapped A's mapping; its record is still there
			return err
		})
	}()
	<-inFirst
	require.NoError(t, mapHandle(tab, d, hB, at+g2, g2))
	require.NoError(t, tab.release(hB, d.release)) // the mapping is B's last hold
	go func() { second <- tab.unmap(at, 2*g2, func() error { return d.unmapWithin(tab, at, 2*g2) }) }()
	time.Sleep(20 * time.Millisecond) // the second unmap looks the range up meanwhile
	close(letGo)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	require.Zero(t, tab.recorded(), "the driver has no mapping left")
	require.False(t, tab.known(hB))
	require.EqualValues(t, 1, d.frees.Load(), "B freed by the second unmap")
	require.NoError(t, tab.release(hA, d.release))
	n, refs := tab.live()
	require.Zero(t, n+refs)
}

// A caller can name the next generation of a slot before it exists (a released handle's
// slot comes back one generation up): releasing it while open fills the slot must find the
// reference open made, or be refused; never reach the driver with a reference the process
// does not hold.
func TestReleaseOfTheNextGenerationDuringOpen(t *testing.T) {
	tab := new(handleTable)
	var mu sync.Mutex
	refs := 0
	const v = 0x7f0000990000 // the driver hands the freed value out again
	release := func(uint64) error {
		mu.Lock()
		defer mu.Unlock()
		if refs <= 0 {
			return fmt.Errorf("release of %#x, which the process does not hold", v)
		}
		refs--
		return nil
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p := tab.pages[0].Load(); p != nil {
				s := &p[0]
				if err := tab.release(handleOf(0, s.g.Gen()), release); err != nil && !errors.Is(err, ErrUnknownHandle) {
					t.Error(err)
					return
				}
			}
		}
	}()
	for range 100000 {
		mu.Lock()
		refs++
		mu.Unlock()
		h, err := tab.add(v)
		require.NoError(t, err)
		if err := tab.release(h, release); err != nil && !errors.Is(err, ErrUnknownHandle) {
			t.Fatal(err)
		}
		require.GreaterOrEqual(t, tab.slot(0).refs.Load(), int32(0))
	}
	close(stop)
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, refs, "every reference released once")
	n, held := tab.live()
	require.Zero(t, n+held)
}
