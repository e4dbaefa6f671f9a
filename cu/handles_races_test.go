package cu

import (
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
	idx, ok := tab.containing(base + 4<<20)
	require.True(t, ok)
	require.EqualValues(t, 8, idx)
	idx, ok = tab.containing(base + 1<<20)
	require.True(t, ok)
	require.EqualValues(t, 7, idx)
	_, ok = tab.containing(base + 5<<20)
	require.False(t, ok)
}
