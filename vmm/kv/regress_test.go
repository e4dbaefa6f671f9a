package kv_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cases below reproduced what a hostile review of this package found wrong; each
// comment says what was. They pass now and stay, as regression tests.

// hooked lets a test stall chosen driver calls.
type hooked struct {
	vmm.Backend
	onUnmap  func()
	onCreate func()
}

func (h *hooked) Unmap(p cu.DevicePtr, n uint64) error {
	if f := h.onUnmap; f != nil {
		f()
	}
	return h.Backend.Unmap(p, n)
}

func (h *hooked) Create(size uint64, prop *cu.MemAllocationProp, flags uint64) (cu.MemHandle, error) {
	if f := h.onCreate; f != nil {
		f()
	}
	return h.Backend.Create(size, prop, flags)
}

// resident: is page p of slot mapped (and accessible) in every plane?
func missing(s *sim.Sim, c *kv.Cache, planes, slot, pages int) []string {
	var out []string
	for i := range planes {
		for p := range pages {
			addr := c.Plane(i) + cu.DevicePtr(uint64(slot)*c.SlotBytes()+uint64(p)*c.PageSize())
			if _, _, err := s.AddressRange(addr); err != nil {
				out = append(out, "plane "+itoa(i)+" page "+itoa(p))
			}
		}
	}
	return out
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

// Was: a Trim whose unmap fails in one plane leaves mapped as it was though the other planes'
// pages are gone: a later Ensure succeeds on the fast path over unmapped pages.
func TestRegressPartialTrimFailure(t *testing.T) {
	s, _, c := newCache(t, kv.Options{})
	require.NoError(t, c.Ensure(0, 4096)) // 4 pages
	require.NoError(t, c.Ensure(0, 100))  // request shrank (or next request): 1 page in use
	require.NoError(t, s.FailNth(sim.OpUnmap, 2, cu.ERROR_UNKNOWN))
	require.Error(t, c.Trim())
	require.NoError(t, c.Ensure(0, 4096), "fast path")
	t.Logf("Ensure(0, 4096) = nil; unmapped: %v", missing(s, c, geometry.Planes, 0, 4))
	t.Logf("kv Bytes %d, sim committed %d", c.Stats().Bytes, s.Stats().Committed[0])
	assert.Empty(t, missing(s, c, geometry.Planes, 0, 4))
	require.NoError(t, c.Close())
}

// Was: an unmap refused during a commit's rollback leaves the mapping in place (pending until
// Close): the page index can never be committed again, and its memory is not counted.
func TestRegressRollbackUnmapFailureWedges(t *testing.T) {
	s, _, c := newCache(t, kv.Options{Limit: 2 * 8 * 2 * mib})
	require.NoError(t, c.Ensure(0, 100))
	require.NoError(t, s.FailNth(sim.OpSetAccess, 1, cu.ERROR_OUT_OF_MEMORY))
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN))
	require.Error(t, c.Ensure(0, 2000))
	t.Logf("kv Bytes %d, sim committed %d, mappings %d", c.Stats().Bytes, s.Stats().Committed[0], s.Stats().Mappings)
	err := c.Ensure(0, 2000)
	t.Logf("retry: %v", err)
	assert.NoError(t, err)
	t.Logf("close: %v, clean %v", c.Close(), s.Stats().Clean())
}

// Was: a commit after a failed one unmapped nothing the rollback left when the Pending
// list's retry of that unmap was refused once more, and then mapped over it: "range already
// mapped", where an unmap of the range goes through.
func TestRegressRollbackUnmapRefusedTwice(t *testing.T) {
	s, _, c := newCache(t, kv.Options{})
	require.NoError(t, c.Ensure(0, 100))
	require.NoError(t, s.FailNth(sim.OpSetAccess, 1, cu.ERROR_OUT_OF_MEMORY))
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN))
	require.Error(t, c.Ensure(0, 2000))
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN)) // the Pending retry's
	require.NoError(t, c.Ensure(0, 2000))
	assert.Empty(t, missing(s, c, geometry.Planes, 0, 2))
	require.NoError(t, c.Close())
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Was: Ensure computes n before reserveRoom, which drops c.mu while it trims other slots;
// the committer commits a page of the slot meanwhile, and Ensure then commits n pages from
// the new mapped: past the slot's end, into slot 1's page 0.
func TestRegressReserveRoomStaleN(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	h := &hooked{Backend: s}
	m := vmm.New(h)
	g := kv.Geometry{Planes: 2, BytesPerToken: 2048, Slots: 2, MaxTokens: 4096}
	c, err := kv.New(m, g, kv.Options{Ahead: 1, Limit: 6 * 2 * 2 * mib})
	require.NoError(t, err)
	require.NoError(t, c.Ready())
	require.NoError(t, c.Ensure(1, 2500))
	require.NoError(t, c.Ready())
	require.NoError(t, c.Ensure(1, 0)) // active, nothing in use
	require.Equal(t, 5, c.Stats().Pages)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.onUnmap = func() { once.Do(func() { close(entered); <-release }) }
	done := make(chan error)
	go func() { done <- c.Ensure(0, 4096) }()
	<-entered
	commits := c.Stats().Commits
	for deadline := time.Now().Add(2 * time.Second); c.Stats().Commits == commits && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	t.Logf("committer committed %d during the trim", c.Stats().Commits-commits)
	if c.Stats().Commits == commits {
		buf := make([]byte, 1<<16)
		n := runtime.Stack(buf, true)
		t.Logf("%s", buf[:n])
	}
	close(release)
	require.NoError(t, <-done)
	st := c.Stats()
	t.Logf("after Ensure(0, 4096): Pages %d (slot capacity 4 each)", st.Pages)
	err = c.Ensure(1, 100)
	t.Logf("Ensure(1, 100) = %v", err)
	assert.NoError(t, err)
	t.Logf("Ready = %v", c.Ready())
	c.Release(0)
	t.Logf("close: %v, clean %v", c.Close(), s.Stats().Clean())
}

// Was: Ready reports a commit failure the cache has since recovered from.
func TestRegressStaleBehind(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	for n := 1; n <= 4; n++ { // the committer's commit and its immediate retry
		require.NoError(t, s.FailNth(sim.OpCreate, n, cu.ERROR_OUT_OF_MEMORY))
	}
	g := kv.Geometry{Planes: 2, BytesPerToken: 2048, Slots: 1, MaxTokens: 1024}
	c, err := kv.New(vmm.New(s), g, kv.Options{Ahead: 1})
	require.NoError(t, err)
	require.Error(t, c.Ready())
	s.ClearFaults()
	require.NoError(t, c.Ensure(0, 1))
	time.Sleep(100 * time.Millisecond)
	t.Logf("Stats %+v; Ready: %v", c.Stats(), c.Ready())
	assert.NoError(t, c.Ready(), "every page is there")
	require.NoError(t, c.Close())
}

// Was: Close while an Ensure is in reserveRoom: Ensure commits after Close went past its
// slot, and returns nil on a closed cache.
func TestRegressCloseDuringReserveRoom(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	h := &hooked{Backend: s}
	g := kv.Geometry{Planes: 2, BytesPerToken: 2048, Slots: 2, MaxTokens: 4096}
	c, err := kv.New(vmm.New(h), g, kv.Options{Limit: 4 * 2 * 2 * mib})
	require.NoError(t, err)
	require.NoError(t, c.Ensure(1, 4096))
	require.NoError(t, c.Ensure(1, 0))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.onUnmap = func() { once.Do(func() { close(entered); <-release }) }
	done := make(chan error)
	go func() { done <- c.Ensure(0, 2048) }()
	<-entered
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	time.Sleep(50 * time.Millisecond)
	var creates atomic.Int32
	h.onCreate = func() {
		if creates.Add(1) == 1 {
			time.Sleep(50 * time.Millisecond) // let Close run on
		}
	}
	close(release)
	errE, errC := <-done, <-closed
	t.Logf("Ensure: %v; Close: %v; Stats after Close %+v; sim clean %v %+v", errE, errC, c.Stats(), s.Stats().Clean(), s.Stats())
}

// Was: Plane after Close panics.
func TestRegressPlaneAfterClose(t *testing.T) {
	_, _, c := newCache(t, kv.Options{})
	require.NoError(t, c.Close())
	assert.NotPanics(t, func() { _ = c.Plane(0) })
}

// TestTrimRefillsAhead (review): after Trim the committer maps the pages it keeps ahead
// again, so that a new request on a free slot finds its page.
func TestTrimRefillsAhead(t *testing.T) {
	_, _, c := newCache(t, kv.Options{Ahead: 2})
	require.NoError(t, c.Ready())
	require.Equal(t, 8, c.Stats().Pages)
	require.NoError(t, c.Trim())
	assert.Eventually(t, func() bool { return c.Stats().Pages == 8 }, 2*time.Second, 5*time.Millisecond,
		"two pages ahead in each of the four free slots again, without a call to wake the committer")
	require.NoError(t, c.Close())
}

// A free the driver refuses in a failed New's undo goes to the Manager's Pending list, as
// no Cache is returned to retry it on; the Manager's next Create retries it.
func TestNewUndoLeavesNothing(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	m := vmm.New(s)
	require.NoError(t, s.FailNth(sim.OpReserve, 2, cu.ERROR_OUT_OF_MEMORY))
	require.NoError(t, s.FailNth(sim.OpFree, 1, cu.ERROR_UNKNOWN))
	_, err = kv.New(m, geometry, kv.Options{})
	s.ClearFaults()
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	require.ErrorIs(t, err, cu.ERROR_UNKNOWN)
	require.Equal(t, 1, m.Pending().Len())
	a, err := m.Create(2<<20, vmm.DeviceProps(0))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}
