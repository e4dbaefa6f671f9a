package kv_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

// geometry is 8 planes of 4 slots of 4096 tokens at 2 KiB a token: 1024 tokens a 2 MiB page,
// 4 pages a slot.
var geometry = kv.Geometry{Planes: 8, BytesPerToken: 2048, Slots: 4, MaxTokens: 4096}

func newCache(t *testing.T, opts kv.Options) (*sim.Sim, *vmm.Manager, *kv.Cache) {
	t.Helper()
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	m := vmm.New(s)
	c, err := kv.New(m, geometry, opts)
	require.NoError(t, err)
	return s, m, c
}

func calls(s *sim.Sim, op sim.Op) uint64 { return s.Stats().Calls[op.String()] }

// TestEnsureCommitsAcrossPlanes: the pages the tokens touch, in every plane, with one
// access call per plane; the memory is usable at the slot's fixed addresses.
func TestEnsureCommitsAcrossPlanes(t *testing.T) {
	s, m, c := newCache(t, kv.Options{})
	require.NoError(t, c.Ensure(1, 1500)) // two pages
	st := c.Stats()
	assert.Equal(t, 2, st.Pages)
	assert.Equal(t, 2, st.StepCommits)
	assert.Equal(t, uint64(16), calls(s, sim.OpCreate))
	assert.Equal(t, uint64(16), calls(s, sim.OpMap))
	assert.Equal(t, uint64(8), calls(s, sim.OpSetAccess), "one access call per plane for the run of pages")
	assert.Equal(t, uint64(16), calls(s, sim.OpRelease), "the pages' own references")
	assert.Equal(t, int(calls(s, sim.OpCreate)+calls(s, sim.OpMap)+calls(s, sim.OpSetAccess)+calls(s, sim.OpRelease)), st.StepCalls)
	assert.Equal(t, uint64(2*8*2*mib), st.Bytes)
	assert.Equal(t, uint64(2*8*2*mib), s.Stats().Committed[0])
	for i := range geometry.Planes {
		addr := c.Plane(i) + cu.DevicePtr(c.SlotBytes()) // slot 1
		want := pattern.Bytes(byte(i), 1500*2048)
		require.NoError(t, m.WriteAt(0, want, addr))
		got := make([]byte, len(want))
		require.NoError(t, m.ReadAt(0, got, addr))
		require.Equal(t, want, got, "plane %d", i)
	}
	require.NoError(t, c.Ensure(1, 2048), "already resident")
	assert.Equal(t, 2, c.Stats().StepCommits)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// TestFaultAtAnyPlaneLeavesNothing: a driver call failing at plane k > 0 leaves no handle,
// mapping or page of that page index, and a retry commits it whole.
func TestFaultAtAnyPlaneLeavesNothing(t *testing.T) {
	for _, op := range []sim.Op{sim.OpCreate, sim.OpMap, sim.OpSetAccess} {
		for _, n := range []int{2, 5, 8} {
			t.Run(fmt.Sprintf("%v/%d", op, n), func(t *testing.T) {
				s, _, c := newCache(t, kv.Options{})
				require.NoError(t, c.Ensure(0, 100))
				before := s.Stats()
				require.NoError(t, s.FailNth(op, n, cu.ERROR_OUT_OF_MEMORY))
				err := c.Ensure(0, 2000) // one more page index
				require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
				s.ClearFaults()
				after := s.Stats()
				assert.Equal(t, before.Handles, after.Handles, "handles")
				assert.Equal(t, before.Mappings, after.Mappings, "mappings")
				assert.Equal(t, before.Committed, after.Committed, "device memory")
				assert.Equal(t, 1, c.Stats().Pages)
				require.NoError(t, c.Ensure(0, 2000))
				assert.Equal(t, 2, c.Stats().Pages)
				require.NoError(t, c.Close())
				assert.True(t, s.Stats().Clean())
			})
		}
	}
}

// TestReleaseKeepsPagesTrimGivesBack: a finished slot's pages serve its next request
// without a driver call; Trim gives back what no slot uses, and the limit holds.
func TestReleaseKeepsPagesTrimGivesBack(t *testing.T) {
	s, _, c := newCache(t, kv.Options{Limit: 3 * 8 * 2 * mib})
	require.NoError(t, c.Ensure(0, 2048))
	c.Release(0)
	maps := calls(s, sim.OpMap)
	require.NoError(t, c.Ensure(0, 1000), "the next request of the slot")
	assert.Equal(t, maps, calls(s, sim.OpMap), "no map between requests")
	require.NoError(t, c.Ensure(1, 1000)) // three page indices: the limit
	require.NoError(t, c.Ensure(2, 1000), "slot 0's second page, unused, is trimmed to make room")
	assert.Equal(t, 1, c.Stats().Trimmed)
	err := c.Ensure(0, 2048)
	require.ErrorIs(t, err, vmm.ErrTooLarge, "every page is in use")
	assert.Contains(t, err.Error(), "would pass the limit of 48MiB")
	c.Release(1)
	c.Release(2)
	require.NoError(t, c.Trim())
	assert.Equal(t, 1, c.Stats().Pages)
	assert.Equal(t, uint64(8*2*mib), s.Stats().Committed[0], "device memory dropped back")
	require.NoError(t, c.Close())
	assert.True(t, s.Stats().Clean())
}

// TestCommitterKeepsTheStepPathFree: with pages kept ahead, requests that grow within them
// make no driver call in Ensure.
func TestCommitterKeepsTheStepPathFree(t *testing.T) {
	s, _, c := newCache(t, kv.Options{Ahead: 2})
	require.NoError(t, c.Ready())
	assert.Equal(t, 8, c.Stats().Pages, "two pages in each of the four free slots")
	for tok := 1; tok <= 2048; tok += 97 {
		require.NoError(t, c.Ensure(3, tok))
	}
	require.NoError(t, c.Ready())
	st := c.Stats()
	assert.Zero(t, st.StepCommits)
	assert.Zero(t, st.StepCalls)
	assert.Equal(t, uint64(8*st.Commits), calls(s, sim.OpCreate), "only the committer created pages")
	assert.Equal(t, 4, c.Stats().Pages-6, "slot 3: its two pages and two ahead (the slot's four)")
	require.NoError(t, c.Close())
	assert.True(t, s.Stats().Clean())
}

// TestConcurrentSteps: requests growing on every slot at once, with the committer and
// Trim running, under the race detector in CI; Close while the committer runs.
func TestConcurrentSteps(t *testing.T) {
	s, m, c := newCache(t, kv.Options{Ahead: 1})
	var wg sync.WaitGroup
	for slot := range geometry.Slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				for tok := 1; tok <= geometry.MaxTokens; tok += 331 {
					if !assert.NoError(t, c.Ensure(slot, tok)) {
						return
					}
				}
				addr := c.Plane(round%geometry.Planes) + cu.DevicePtr(uint64(slot)*c.SlotBytes())
				assert.NoError(t, m.WriteAt(0, []byte("token"), addr))
				c.Release(slot)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			_ = c.Trim()
			_ = c.Stats()
		}
	}()
	wg.Wait()
	require.NoError(t, c.Close())
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
	require.ErrorIs(t, c.Ensure(0, 1), vmm.ErrClosed)
}

func TestBadArguments(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	m := vmm.New(s)
	for _, g := range []kv.Geometry{{}, {Planes: 1, BytesPerToken: 1, Slots: 1, MaxTokens: 1, PageSize: 3 * mib}} {
		_, err := kv.New(m, g, kv.Options{})
		require.ErrorIs(t, err, vmm.ErrInvalid, "%+v", g)
	}
	// Geometries whose slot or plane would not fit in 64 bits, and one whose slot array
	// would not fit in memory: refused before anything is reserved or allocated.
	for _, g := range []kv.Geometry{
		{Planes: 1, BytesPerToken: 1<<62 + 1<<21, Slots: 1, MaxTokens: 4},
		{Planes: 1, BytesPerToken: 1<<64 - 1, Slots: 1, MaxTokens: 1},
		{Planes: 1, BytesPerToken: 2 * mib, Slots: 1<<18 + 1, MaxTokens: 1 << 25},
		{Planes: 1, BytesPerToken: 2048, Slots: 1 << 42, MaxTokens: 1024},
	} {
		_, err := kv.New(m, g, kv.Options{})
		require.Error(t, err, "%+v", g)
		require.Contains(t, err.Error(), "kv: new", "%+v", g)
	}
	c, err := kv.New(m, geometry, kv.Options{})
	require.NoError(t, err)
	require.ErrorIs(t, c.Ensure(4, 1), vmm.ErrOutOfRange)
	require.ErrorIs(t, c.Ensure(0, 4097), vmm.ErrOutOfRange)
	require.Zero(t, c.Plane(-1))
	require.Zero(t, c.Plane(geometry.Planes))
	require.NoError(t, c.Close())
	assert.True(t, s.Stats().Clean())
}

// A nil or zero Cache fails every call with ErrInvalid, and answers zero.
func TestNilAndZeroCache(t *testing.T) {
	for name, c := range map[string]*kv.Cache{"nil": nil, "zero": {}} {
		for op, err := range map[string]error{
			"ensure": c.Ensure(0, 1), "release": c.Release(0), "ready": c.Ready(), "trim": c.Trim(), "close": c.Close(),
		} {
			require.ErrorIs(t, err, vmm.ErrInvalid, "%s %s", name, op)
			require.Contains(t, err.Error(), "kv: "+op, "%s %s", name, op)
		}
		require.Zero(t, c.Plane(0), name)
		require.Zero(t, c.SlotBytes(), name)
		require.Zero(t, c.PageSize(), name)
		require.Zero(t, c.Stats(), name)
	}
}

// A Close the driver refused in part (a plane's free: a refused unmap the same Close
// retries) is retried by the next one.
func TestCloseRetries(t *testing.T) {
	s, m, c := newCache(t, kv.Options{})
	require.NoError(t, c.Ensure(0, 2000))
	require.NoError(t, s.FailNth(sim.OpFree, 1, cu.ERROR_UNKNOWN))
	require.ErrorIs(t, c.Close(), cu.ERROR_UNKNOWN)
	require.Equal(t, 1, s.Stats().Reservations)
	s.ClearFaults()
	require.NoError(t, c.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	require.Zero(t, m.Pending().Len())
}

// BenchmarkEnsureResident is the step path's cost when the pages are there: one Ensure of
// each of 64 slots a step, a token more each, the committer running beside.
func BenchmarkEnsureResident(b *testing.B) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(b, err)
	g := kv.Geometry{Planes: 2, BytesPerToken: 2048, Slots: 64, MaxTokens: 1 << 20}
	c, err := kv.New(vmm.New(s), g, kv.Options{Ahead: 1})
	require.NoError(b, err)
	defer c.Close()
	for slot := range g.Slots {
		require.NoError(b, c.Ensure(slot, 1))
	}
	require.NoError(b, c.Ready())
	b.ResetTimer()
	tok := 1
	for i := 0; i < b.N; i += g.Slots {
		tok = tok%1000 + 1 // within the first page
		for slot := range g.Slots {
			if err := c.Ensure(slot, tok); err != nil {
				b.Fatal(err)
			}
		}
	}
}
