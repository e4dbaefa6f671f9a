package cu

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// fakeDriver stands in for the driver's handle bookkeeping: it counts references per
// value and fails the test if a value it does not hold reaches it, which on the real
// driver would crash the process.
type fakeDriver struct {
	t     testing.TB
	mu    sync.Mutex
	refs  map[uint64]int
	next  uint64
	calls atomic.Int64
}

func newFakeDriver(t testing.TB) *fakeDriver {
	return &fakeDriver{t: t, refs: map[uint64]int{}, next: 0x7f0000001000}
}

func (d *fakeDriver) create() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next += 0x40
	d.refs[d.next] = 1
	return d.next
}

func (d *fakeDriver) retain(v uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refs[v]++
}

// use is any call that passes a handle (map, export, properties).
func (d *fakeDriver) use(v uint64) {
	d.calls.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refs[v] == 0 {
		d.t.Errorf("driver got value %#x, which it does not hold: the real driver would crash", v)
	}
}

func (d *fakeDriver) release(v uint64) error {
	d.use(v)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refs[v]--; d.refs[v] == 0 {
		delete(d.refs, v)
	}
	return nil
}

func TestHandleRefcounts(t *testing.T) {
	tab, drv := new(handleTable), newFakeDriver(t)
	v := drv.create()
	h, err := tab.add(v)
	require.NoError(t, err)
	drv.retain(v)
	h2, err := tab.add(v) // a retain of the same allocation returns the handle already held
	require.NoError(t, err)
	require.Equal(t, h, h2)
	require.NotEqual(t, MemHandle(v), h, "cu's value is not the driver's")

	require.NoError(t, tab.release(h, drv.release))
	s, got, err := tab.pin(h)
	require.NoError(t, err, "one reference left")
	require.Equal(t, v, got)
	s.unpin()
	require.NoError(t, tab.release(h, drv.release))
	_, _, err = tab.pin(h)
	require.ErrorIs(t, err, ErrUnknownHandle)
	require.ErrorIs(t, tab.release(h, drv.release), ErrUnknownHandle)
	require.EqualValues(t, 2, drv.calls.Load(), "the driver is not called for a released handle")
	n, refs := tab.live()
	require.Zero(t, n)
	require.Zero(t, refs)
}

func TestHandleFailedReleaseKeepsReference(t *testing.T) {
	tab, drv := new(handleTable), newFakeDriver(t)
	h, err := tab.add(drv.create())
	require.NoError(t, err)
	refuse := func(uint64) error { return ERROR_INVALID_VALUE }
	require.ErrorIs(t, tab.release(h, refuse), ERROR_INVALID_VALUE)
	require.True(t, tab.known(h))
	s, _, err := tab.pin(h)
	require.NoError(t, err, "a failed release leaves the handle usable")
	s.unpin()
	require.NoError(t, tab.release(h, drv.release))
}

func TestHandleValuesNeverMadeUp(t *testing.T) {
	tab, drv := new(handleTable), newFakeDriver(t)
	v := drv.create()
	h, err := tab.add(v)
	require.NoError(t, err)
	stale := h
	require.NoError(t, tab.release(h, drv.release))
	// The driver may hand out the same value again; the slot is recycled for it in a new
	// generation, and the old handle does not name it.
	v2 := v
	drv.retain(v2)
	h2, err := tab.add(v2)
	require.NoError(t, err)
	require.Equal(t, uint32(stale), uint32(h2), "the slot is reused")
	require.NotEqual(t, stale, h2)

	for _, bogus := range []MemHandle{0, 1, 0xdeadbeef, MemHandle(v), MemHandle(v2), stale,
		h2 &^ (0xffffffff << 32), // generation 0
		h2 + 1<<32,               // a later generation
		h2 + 1,                   // the neighbouring slot, never used
		MemHandle(uint64(1)<<32 | maxSlots), ^MemHandle(0)} {
		_, _, err := tab.pin(bogus)
		require.ErrorIs(t, err, ErrUnknownHandle, "%#x", uint64(bogus))
		require.ErrorIs(t, tab.release(bogus, drv.release), ErrUnknownHandle, "%#x", uint64(bogus))
		require.False(t, tab.known(bogus))
	}
	require.True(t, tab.known(h2))
	require.NoError(t, tab.release(h2, drv.release))
}

func TestHandleReleaseWaitsForCallsInFlight(t *testing.T) {
	tab, drv := new(handleTable), newFakeDriver(t)
	v := drv.create()
	h, err := tab.add(v)
	require.NoError(t, err)
	s, _, err := tab.pin(h) // a driver call in flight on h
	require.NoError(t, err)

	released := make(chan error)
	go func() { released <- tab.release(h, drv.release) }()
	// Once the release is waiting, no new call may start on h.
	require.Eventually(t, func() bool { return !s.g.Open() }, 5*time.Second, time.Millisecond)
	_, _, err = tab.pin(h)
	require.ErrorIs(t, err, ErrUnknownHandle)
	select {
	case err := <-released:
		t.Fatalf("release returned (%v) while a call was in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	drv.use(v) // the call in flight still holds a valid value
	s.unpin()
	require.NoError(t, <-released)
	require.False(t, tab.known(h))
}

func TestHandleOtherReferencesDoNotWait(t *testing.T) {
	tab, drv := new(handleTable), newFakeDriver(t)
	v := drv.create()
	h, err := tab.add(v)
	require.NoError(t, err)
	drv.retain(v)
	_, err = tab.add(v)
	require.NoError(t, err)
	s, _, err := tab.pin(h)
	require.NoError(t, err)
	// Not the last reference: the value stays valid, so the release need not wait.
	require.NoError(t, tab.release(h, drv.release))
	s.unpin()
	require.NoError(t, tab.release(h, drv.release))
}

// TestHandleConcurrentReleases runs goroutines that create, use, retain and release their
// own handles and the shared ones, while others keep trying handles that were released:
// the fake driver fails the test if a released value ever reaches it.
func TestHandleConcurrentReleases(t *testing.T) {
	tab, drv := new(handleTable), newFakeDriver(t)
	var dead sync.Map // released handles
	var refused, reached atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 { // goroutines that keep trying released handles
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				dead.Range(func(k, _ any) bool {
					if s, v, err := tab.pin(k.(MemHandle)); err == nil {
						// Only possible if the slot was recycled into the same generation.
						drv.use(v)
						s.unpin()
						t.Errorf("released handle %v pinned", k)
					} else {
						refused.Add(1)
					}
					return true
				})
				runtime.Gosched()
			}
		}()
	}
	var users sync.WaitGroup
	for g := range 8 {
		users.Add(1)
		go func() {
			defer users.Done()
			for i := range 100 {
				v := drv.create()
				h, err := tab.add(v)
				if err != nil {
					t.Error(err)
					return
				}
				// Other goroutines use h until it is released; the release starts once they
				// are under way, so it has calls in flight to wait for.
				var inner sync.WaitGroup
				started := make(chan struct{}, 2)
				for range 2 {
					inner.Add(1)
					go func() {
						defer inner.Done()
						for n := 0; ; n++ {
							s, v, err := tab.pin(h)
							if err != nil {
								return
							}
							if n == 0 {
								started <- struct{}{}
							}
							runtime.Gosched() // a call in flight
							drv.use(v)
							reached.Add(1)
							s.unpin()
						}
					}()
				}
				<-started
				if (g+i)%3 == 0 { // a retained second reference, released first
					drv.retain(v)
					if h2, err := tab.add(v); err != nil || h2 != h {
						t.Errorf("retain: %v %v", h2, err)
					}
					if err := tab.release(h, drv.release); err != nil {
						t.Error(err)
					}
				}
				if err := tab.release(h, drv.release); err != nil {
					t.Error(err)
				}
				dead.Store(h, true)
				inner.Wait()
			}
		}()
	}
	users.Wait()
	close(stop)
	wg.Wait()
	n, refs := tab.live()
	require.Zero(t, n, "handles leaked")
	require.Zero(t, refs)
	drv.mu.Lock()
	require.Empty(t, drv.refs, "driver references leaked")
	drv.mu.Unlock()
	t.Logf("calls that reached the driver: %d; refusals of released handles: %d", reached.Load(), refused.Load())
	require.Positive(t, refused.Load())
	require.Positive(t, reached.Load())
}

func TestHandlePinAllocatesNothing(t *testing.T) {
	tab, drv := new(handleTable), newFakeDriver(t)
	h, err := tab.add(drv.create())
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(1000, func() {
		s, _, err := tab.pin(h)
		if err != nil {
			panic(err)
		}
		s.unpin()
	})
	require.Zero(t, allocs)
	require.NoError(t, tab.release(h, drv.release))
}

func TestHandleSlotIsOneCacheLine(t *testing.T) {
	require.EqualValues(t, 64, unsafe.Sizeof(slot{}), "slots of different handles must not share a cache line")
	require.EqualValues(t, 64, unsafe.Sizeof(shard{}))
}

func TestHandleTableFull(t *testing.T) {
	tab := new(handleTable)
	tab.next.Store(maxSlots)
	_, err := tab.add(0x1234)
	require.True(t, errors.Is(err, ERROR_OUT_OF_MEMORY), "%v", err)
	require.EqualValues(t, maxSlots, tab.next.Load())
}

// TestHandleValueReuseAndSlotRecycling churns handles through a driver that hands freed
// values out again, as the real one does with its heap addresses: every live value has
// exactly one handle, the handle of a freed value stays dead after the value returns, and
// the table recycles its slots instead of growing past the most handles ever live at once.
func TestHandleValueReuseAndSlotRecycling(t *testing.T) {
	tab := new(handleTable)
	const maxLive = 300
	var freed []uint64 // values the driver will hand out again, newest last
	next := uint64(0x7f0000000000)
	create := func() uint64 {
		if n := len(freed); n > 0 && n%3 != 0 {
			v := freed[n-1]
			freed = freed[:n-1]
			return v
		}
		next += 0x200
		return next
	}
	live := map[uint64]MemHandle{} // value -> its handle
	var dead []MemHandle
	seed := uint64(1)
	rnd := func(n int) int { seed = seed*6364136223846793005 + 1442695040888963407; return int(seed>>33) % n }
	for step := range 20000 {
		if len(live) < maxLive && (len(live) == 0 || rnd(2) == 0) {
			v := create()
			h, err := tab.add(v)
			require.NoError(t, err)
			_, dup := live[v]
			require.False(t, dup, "step %d: the driver gave out a live value", step)
			for _, d := range dead {
				require.NotEqual(t, d, h, "step %d: a released handle came back", step)
			}
			live[v] = h
			continue
		}
		var v uint64
		for v = range live {
			break
		}
		h := live[v]
		require.NoError(t, tab.release(h, func(got uint64) error {
			require.Equal(t, v, got)
			return nil
		}))
		delete(live, v)
		freed = append(freed, v)
		if len(dead) < 64 {
			dead = append(dead, h)
		}
		require.False(t, tab.known(h), "step %d: released handle still known", step)
	}
	for v, h := range live {
		s, got, err := tab.pin(h)
		require.NoError(t, err)
		require.Equal(t, v, got)
		s.unpin()
	}
	n, _ := tab.live()
	require.Equal(t, len(live), n)
	require.LessOrEqual(t, int(tab.next.Load()), maxLive+nShards*8,
		"slots are recycled: the table grew to %d slots for at most %d live handles", tab.next.Load(), maxLive)
}
