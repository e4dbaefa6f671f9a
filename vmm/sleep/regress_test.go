package sleep_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sleep"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var bg = context.Background()

// The cases below reproduced what a hostile review of this package found wrong; each
// comment says what was. They pass now and stay, as regression tests.

// Was: a Free refused during Pool.Close leaks the reservation; a second Close says nil.
func TestRegressPoolCloseLeaks(t *testing.T) {
	s, p, _, _ := setup(t)
	require.NoError(t, s.FailNth(sim.OpFree, 1, cu.ERROR_UNKNOWN))
	err1 := p.Close()
	err2 := p.Close()
	t.Logf("first close: %v; second close: %v; stats %+v", err1, err2, s.Stats())
	assert.Error(t, err1)
	assert.True(t, s.Stats().Clean(), "leaked after Close said nil")
}

// Was: a failed Region.Close drops the region from the pool; Pool.Close never retries it.
func TestRegressRegionCloseThenPoolCloseLeaks(t *testing.T) {
	s, p, r, _ := setup(t)
	require.NoError(t, s.FailNth(sim.OpFree, 1, cu.ERROR_UNKNOWN))
	t.Logf("region close: %v", r.Close())
	t.Logf("pool close: %v", p.Close())
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Was: a refused SetAccess during Sleep(Park) leaves a chunk Offloaded; the retried
// Sleep(Park) says nil, yet the range is not mapped for the device.
func TestRegressParkRetryNotParked(t *testing.T) {
	s, p, r, _ := setup(t)
	require.NoError(t, p.Prepare("engine"))
	require.NoError(t, s.FailNth(sim.OpSetAccess, 1, cu.ERROR_UNKNOWN))
	t.Logf("sleep: %v", p.Sleep(bg, "engine", sleep.Park))
	require.NoError(t, p.Sleep(bg, "engine", sleep.Park), "the retry succeeds")
	t.Logf("states after a successful Sleep(Park): %v", p.States("engine"))
	_, err := r.ReadAt(make([]byte, 16), 0)
	t.Logf("read of the 'parked' tag: %v", err)
	m := vmm.New(s)
	t.Logf("device read at base: %v", m.ReadAt(0, make([]byte, 16), r.Base()))
	assert.Equal(t, map[sleep.State]uint64{sleep.Parked: 10 * mib}, p.States("engine"))
}

// Was: a failed Alloc whose rollback release is refused leaks: the tx's Pending is a local.
func TestRegressAllocRollbackLeaks(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	m := vmm.New(s)
	p := sleep.New(m, sleep.Options{Chunk: 4 * mib})
	require.NoError(t, s.FailNth(sim.OpSetAccess, 1, cu.ERROR_UNKNOWN))
	require.NoError(t, s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN))
	_, err = p.Alloc("engine", 10*mib, 0)
	t.Logf("alloc: %v", err)
	s.ClearFaults()
	t.Logf("pool close: %v, manager pending retry: %v (len %d)", p.Close(), m.Pending().Retry(), m.Pending().Len())
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Was: Prepare: a refused Map then a refused release of the new host memory leaks it.
func TestRegressPrepareLeaks(t *testing.T) {
	s, p, _, _ := setup(t)
	require.NoError(t, s.FailNth(sim.OpMap, 1, cu.ERROR_UNKNOWN))
	require.NoError(t, s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN))
	t.Logf("prepare: %v", p.Prepare("engine"))
	s.ClearFaults()
	t.Logf("close: %v", p.Close())
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Was: Wake of a parked chunk: refused Unmap then refused release of the new device memory.
func TestRegressWakeParkedLeaks(t *testing.T) {
	s, p, r, want := setup(t)
	require.NoError(t, p.Sleep(bg, "engine", sleep.Park))
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN))
	require.NoError(t, s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN))
	t.Logf("wake: %v", p.Wake(bg, "engine"))
	s.ClearFaults()
	require.NoError(t, p.Wake(bg, "engine"))
	assert.Equal(t, want, readAll(t, r))
	t.Logf("close: %v", p.Close())
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Was: ReleaseHost: a refused stage Unmap in the wake's dropHost leaves the old host
// mapping in the stage; every later Sleep fails.
func TestRegressReleaseHostStageStuck(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	p := sleep.New(vmm.New(s), sleep.Options{Chunk: 4 * mib, ReleaseHost: true})
	_, err = p.Alloc("engine", 10*mib, 0)
	require.NoError(t, err)
	require.NoError(t, p.Sleep(bg, "engine", sleep.Offload))
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN))
	t.Logf("wake: %v", p.Wake(bg, "engine"))
	s.ClearFaults()
	t.Logf("wake retry: %v", p.Wake(bg, "engine"))
	for i := range 3 {
		err := p.Sleep(bg, "engine", sleep.Offload)
		t.Logf("sleep %d: %v %v", i, err, p.States("engine"))
	}
	assert.NoError(t, p.Sleep(bg, "engine", sleep.Offload))
	require.NoError(t, p.Close())
	assert.True(t, s.Stats().Clean())
}

// Was: Region.Close after a refused Unmap inside it: the reservation is freed anyway, but
// r.closed stays false and every later Close fails with ErrClosed.
func TestRegressRegionCloseNeverSucceedsAgain(t *testing.T) {
	s, p, r, _ := setup(t)
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN))
	t.Logf("close 1: %v", r.Close())
	for i := 2; i <= 3; i++ {
		t.Logf("close %d: %v", i, r.Close())
	}
	assert.NoError(t, r.Close())
	t.Logf("stats clean: %v; pool close %v", s.Stats().Clean(), p.Close())
}

// Was: a failed release stage does not stop the copies: all chunks are copied (and host
// memory pinned) after the first chunk's Unmap failed.
func TestRegressPipelineDoesNotStop(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	p := sleep.New(vmm.New(s), sleep.Options{Chunk: 2 * mib})
	_, err = p.Alloc("engine", 64*mib, 0)
	require.NoError(t, err)
	c0 := s.Stats().Calls["CopyDtoD"]
	h0 := s.Stats().Calls["Create"]
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN))
	err = p.Sleep(bg, "engine", sleep.Offload)
	t.Logf("sleep: %v; copies made: %d, host creates: %d of 32 chunks; states %v",
		err, s.Stats().Calls["CopyDtoD"]-c0, s.Stats().Calls["Create"]-h0, p.States("engine"))
	require.NoError(t, p.Close())
}

// Error messages.
func TestRegressMessages(t *testing.T) {
	s, p, r, _ := setup(t)
	require.NoError(t, p.Sleep(bg, "engine", sleep.Offload))
	_, err := r.ReadAt(make([]byte, 8), 4*mib)
	t.Logf("read asleep: %v", err)
	require.NoError(t, s.SetCapacity(0, s.Stats().Committed[0]+2*mib))
	t.Logf("wake oom: %v", p.Wake(bg, "engine"))
	require.NoError(t, s.SetCapacity(0, 141<<30))
	require.NoError(t, s.FailNth(sim.OpCopyDtoD, 1, cu.ERROR_UNKNOWN))
	t.Logf("wake copy: %v", p.Wake(bg, "engine"))
	t.Logf("bad mode: %v", p.Sleep(bg, "engine", 0))
	_, err = p.Alloc("x", 0, 0)
	t.Logf("alloc 0: %v", err)
	_, err = p.Alloc("x", 1, 7)
	t.Logf("alloc dev 7: %v", err)
	_, err = p.Alloc("x", ^uint64(0), 0)
	t.Logf("alloc maxuint: %v", err)
	t.Logf("unknown tag sleep: %v wake: %v prepare: %v", p.Sleep(bg, "typo", sleep.Offload), p.Wake(bg, "typo"), p.Prepare("typo"))
	require.NoError(t, p.Close())
	_, err = r.WriteAt([]byte{1}, 0)
	t.Logf("after close: %v", err)
	_, err = p.Alloc("x", 1, 0)
	t.Logf("alloc after close: %v", err)
	t.Logf("wake after close: %v", p.Wake(bg, "engine"))
}

// API: zero/nil values.
func TestRegressZeroValues(t *testing.T) {
	try := func(name string, f func()) {
		defer func() {
			if e := recover(); e != nil {
				t.Logf("%s: PANIC %v", name, e)
			}
		}()
		f()
		t.Logf("%s: ok", name)
	}
	try("State(9).String", func() { _ = sleep.State(9).String() })
	try("zero Pool Alloc", func() { var p sleep.Pool; _, err := p.Alloc("t", 1, 0); t.Log(err) })
	try("zero Pool Sleep/Close", func() { var p sleep.Pool; t.Log(p.Sleep(bg, "t", sleep.Offload), p.Close()) })
	try("nil Pool Sleep", func() { var p *sleep.Pool; t.Log(p.Sleep(bg, "t", sleep.Offload)) })
	try("nil Region Close", func() { var r *sleep.Region; t.Log(r.Close()) })
	try("zero Region ReadAt", func() { var r sleep.Region; _, err := r.ReadAt(nil, 0); t.Log(err) })
	try("New(nil) Alloc", func() { _, err := sleep.New(nil, sleep.Options{}).Alloc("t", 1, 0); t.Log(err) })
	try("huge Chunk", func() {
		s, _ := sim.New(sim.PresetH200())
		done := make(chan error, 1)
		go func() {
			_, err := sleep.New(vmm.New(s), sleep.Options{Chunk: ^uint64(0)}).Alloc("t", 4*mib, 0)
			done <- err
		}()
		select {
		case err := <-done:
			t.Log(err)
		case <-time.After(5 * time.Second):
			t.Log("HANG")
		}
	})
	try("nil ctx", func() {
		s, p, _, _ := setup(t)
		_ = s
		//lint:ignore SA1012 testing
		t.Log(p.Sleep(nil, "engine", sleep.Offload)) //nolint
	})
}

// Races: readers/writers of the sleeping tag's regions alongside sleeps, wakes and closes.
func TestRegressRaces(t *testing.T) {
	s, p, r, _ := setup(t)
	r2, err := p.Alloc("engine", 6*mib, 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, reg := range []*sleep.Region{r, r2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 3*mib)
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := reg.ReadAt(b, 1*mib)
				if err != nil && !errors.Is(err, sleep.ErrAsleep) && !errors.Is(err, vmm.ErrClosed) {
					t.Errorf("read: %v", err)
				}
				_, _ = reg.WriteAt(b[:10], 0)
				_ = p.States("engine")
			}
		}()
	}
	for i := range 30 {
		mode := []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard}[i%3]
		ctx, cancel := context.WithCancel(bg)
		go func() { time.Sleep(time.Duration(i%4) * 100 * time.Microsecond); cancel() }()
		_ = p.Sleep(ctx, "engine", mode)
		_ = p.Wake(ctx, "engine")
		require.NoError(t, p.Wake(bg, "engine"))
		cancel()
	}
	require.NoError(t, r2.Close())
	close(stop)
	wg.Wait()
	require.NoError(t, p.Close())
	assert.True(t, s.Stats().Clean(), fmt.Sprint(s.Stats()))
}

// Was: two refusals in a row (SetAccess, then the Unmap that undoes the Map) leave a mapping
// at the chunk's addresses that nobody records; every later Wake fails.
func TestRegressWakeStuckForever(t *testing.T) {
	for _, during := range []string{"sleep", "wake"} {
		t.Run(during, func(t *testing.T) {
			s, p, r, want := setup(t)
			require.NoError(t, p.Prepare("engine"))
			if during == "sleep" {
				// release: Unmap(dev) #1, Map(host) ok, SetAccess #1 fails, mp.Close = Unmap #2 fails
				require.NoError(t, s.FailNth(sim.OpSetAccess, 1, cu.ERROR_UNKNOWN))
				require.NoError(t, s.FailNth(sim.OpUnmap, 2, cu.ERROR_UNKNOWN))
				t.Logf("sleep: %v", p.Sleep(bg, "engine", sleep.Park))
			} else {
				require.NoError(t, p.Sleep(bg, "engine", sleep.Park))
				// create: Unmap(host) #1, Map(dev), SetAccess #1 fails, mp.Close = Unmap #2 fails
				require.NoError(t, s.FailNth(sim.OpSetAccess, 1, cu.ERROR_UNKNOWN))
				require.NoError(t, s.FailNth(sim.OpUnmap, 2, cu.ERROR_UNKNOWN))
				t.Logf("wake: %v", p.Wake(bg, "engine"))
			}
			s.ClearFaults()
			t.Logf("states: %v", p.States("engine"))
			var err error
			for i := range 3 {
				err = p.Wake(bg, "engine")
				t.Logf("wake retry %d: %v", i, err)
			}
			if err == nil {
				assert.Equal(t, want, readAll(t, r))
			}
			assert.NoError(t, err)
			require.NoError(t, p.Close())
			t.Logf("clean after close: %v", s.Stats().Clean())
		})
	}
}

type countCtx struct {
	context.Context
	left int
}

func (c *countCtx) Err() error {
	if c.left--; c.left < 0 {
		return context.Canceled
	}
	return nil
}

// Cancellation at each chunk boundary of a sleep and a wake, every mode.
func TestRegressCancelEverywhere(t *testing.T) {
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		for k := 0; k <= 3; k++ {
			for _, during := range []string{"sleep", "wake"} {
				s, p, r, want := setup(t)
				if mode == sleep.Discard {
					want = make([]byte, len(want))
				}
				if during == "wake" {
					require.NoError(t, p.Sleep(bg, "engine", mode))
					err := p.Wake(&countCtx{bg, k}, "engine")
					assert.True(t, err == nil || errors.Is(err, context.Canceled), "%v", err)
				} else {
					err := p.Sleep(&countCtx{bg, k}, "engine", mode)
					assert.True(t, err == nil || errors.Is(err, context.Canceled), "%v", err)
					require.NoError(t, p.Sleep(bg, "engine", mode))
				}
				require.NoError(t, p.Wake(bg, "engine"))
				assert.Equal(t, want, readAll(t, r), "%v %d %s", mode, k, during)
				require.NoError(t, p.Close())
				assert.True(t, s.Stats().Clean())
			}
		}
	}
}

// Regions closed while the tag sleeps, the others of the tag unaffected.
func TestRegressRegionCloseWhileTagSleeps(t *testing.T) {
	s, p, r, want := setup(t)
	r2, err := p.Alloc("engine", 6*mib, 0)
	require.NoError(t, err)
	require.NoError(t, p.Sleep(bg, "engine", sleep.Park))
	require.NoError(t, r2.Close())
	_, err = r2.ReadAt(make([]byte, 1), 0)
	t.Logf("read closed: %v", err)
	assert.Equal(t, map[sleep.State]uint64{sleep.Parked: 10 * mib}, p.States("engine"))
	require.NoError(t, p.Wake(bg, "engine"))
	assert.Equal(t, want, readAll(t, r))
	require.NoError(t, p.Close())
	assert.True(t, s.Stats().Clean())
}

// Another mode after a partial sleep: Park asked for, Offloaded chunks left unreachable.
func TestRegressModeAfterPartial(t *testing.T) {
	s, p, _, _ := setup(t)
	require.NoError(t, s.FailNth(sim.OpUnmap, 2, cu.ERROR_UNKNOWN))
	t.Logf("offload: %v", p.Sleep(bg, "engine", sleep.Offload))
	require.NoError(t, p.Sleep(bg, "engine", sleep.Park))
	t.Logf("after Sleep(Park) said nil: %v", p.States("engine"))
	require.NoError(t, p.Sleep(bg, "engine", sleep.Discard))
	t.Logf("host still held after Sleep(Discard): %d MiB", s.Stats().Host>>20)
	require.NoError(t, p.Close())
}

// OOM message for a tag on two devices: "needs" sums both devices but names one.
func TestRegressOOMTwoDevices(t *testing.T) {
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	p := sleep.New(vmm.New(s), sleep.Options{Chunk: 4 * mib})
	_, err = p.Alloc("engine", 8*mib, 0)
	require.NoError(t, err)
	_, err = p.Alloc("engine", 64*mib, 1)
	require.NoError(t, err)
	require.NoError(t, p.Sleep(bg, "engine", sleep.Offload))
	require.NoError(t, s.SetCapacity(0, s.Stats().Committed[0]+2*mib))
	t.Logf("%v", p.Wake(bg, "engine"))
	require.NoError(t, p.Close())
}
