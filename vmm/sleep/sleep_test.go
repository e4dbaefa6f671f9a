package sleep_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sleep"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

// setup is a pool over a fresh simulated H200 with a region of three chunks (4, 4 and 2
// MiB) under tag "engine", filled with a pattern.
func setup(t *testing.T) (*sim.Sim, *sleep.Pool, *sleep.Region, []byte) {
	t.Helper()
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	p := sleep.New(vmm.New(s), sleep.Options{Chunk: 4 * mib})
	r, err := p.Alloc("engine", 10*mib, 0)
	require.NoError(t, err)
	want := pattern.Bytes(7, int(r.Size()))
	_, err = r.WriteAt(want, 0)
	require.NoError(t, err)
	return s, p, r, want
}

func readAll(t *testing.T, r *sleep.Region) []byte {
	t.Helper()
	got := make([]byte, r.Size())
	_, err := r.ReadAt(got, 0)
	require.NoError(t, err)
	return got
}

func TestModes(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		t.Run(mode.String(), func(t *testing.T) {
			s, p, r, want := setup(t)
			base := r.Base()
			before := s.Stats().Committed[0]
			require.NoError(t, p.Prepare("engine"))
			require.NoError(t, p.Sleep(ctx, "engine", mode))
			state := map[sleep.Mode]sleep.State{sleep.Offload: sleep.Offloaded, sleep.Park: sleep.Parked, sleep.Discard: sleep.Discarded}[mode]
			assert.Equal(t, map[sleep.State]uint64{state: 10 * mib}, p.States("engine"))
			assert.Equal(t, before-10*mib, s.Stats().Committed[0], "the device memory is given back")
			assert.Equal(t, base, r.Base(), "the addresses stay")
			buf := make([]byte, 4096)
			_, err := r.ReadAt(buf, 0)
			if mode == sleep.Park {
				require.NoError(t, err, "parked memory is read through the host")
				assert.Equal(t, want[:4096], buf)
				_, err = r.WriteAt([]byte("written while parked"), 5*mib)
				require.NoError(t, err)
				copy(want[5*mib:], "written while parked")
			} else {
				require.ErrorIs(t, err, sleep.ErrAsleep)
				require.ErrorIs(t, err, sleep.ErrAsleep)
			}
			require.NoError(t, p.Wake(ctx, "engine"))
			assert.Equal(t, map[sleep.State]uint64{sleep.Resident: 10 * mib}, p.States("engine"))
			assert.Equal(t, before, s.Stats().Committed[0])
			got := readAll(t, r)
			if mode == sleep.Discard {
				assert.Equal(t, make([]byte, len(got)), got, "every discarded byte reads 0")
			} else {
				assert.True(t, bytes.Equal(want, got), "the bytes come back")
			}
			require.NoError(t, p.Close())
			assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
		})
	}
}

// TestParkedMemoryServesTheDevice: device copies (what a kernel does) read a parked range
// and write it, and the writes survive the wake.
func TestParkedMemoryServesTheDevice(t *testing.T) {
	s, p, r, want := setup(t)
	m := vmm.New(s)
	require.NoError(t, p.Sleep(context.Background(), "engine", sleep.Park))
	other, err := m.Reserve(4 * mib)
	require.NoError(t, err)
	a, err := m.Create(4*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	mp, err := other.Map(0, a)
	require.NoError(t, err)
	require.NoError(t, mp.SetAccess(vmm.ReadWrite(0)...))
	require.NoError(t, m.Copy(0, other.Base(), r.Base()+2*mib, 4*mib))
	got := make([]byte, 4*mib)
	require.NoError(t, m.ReadAt(0, got, other.Base()))
	assert.Equal(t, want[2*mib:6*mib], got)
	require.NoError(t, m.Fill(0, r.Base()+9*mib, 0xab, 4096))
	require.NoError(t, p.Wake(context.Background(), "engine"))
	after := readAll(t, r)
	assert.Equal(t, bytes.Repeat([]byte{0xab}, 4096), after[9*mib:9*mib+4096])
	require.NoError(t, errorsJoin(mp.Close(), a.Close(), other.Close(), p.Close()))
	assert.True(t, s.Stats().Clean())
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// TestTransitionsAreIdempotent: sleeping twice, waking twice, waking what never slept,
// another mode on a sleeping tag, one tag of several, and closing while asleep.
func TestTransitionsAreIdempotent(t *testing.T) {
	ctx := context.Background()
	s, p, r, want := setup(t)
	other, err := p.Alloc("weights", 6*mib, 0)
	require.NoError(t, err)
	require.NoError(t, p.Wake(ctx, "engine"), "waking what never slept")
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Offload))
	calls := s.Stats().Calls
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Offload))
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Discard), "a sleeping chunk keeps its mode")
	assert.Equal(t, calls, s.Stats().Calls, "a second sleep makes no driver call")
	assert.Equal(t, map[sleep.State]uint64{sleep.Offloaded: 10 * mib}, p.States("engine"))
	assert.Equal(t, map[sleep.State]uint64{sleep.Resident: 6 * mib}, p.States("weights"), "one tag of several")
	require.NoError(t, p.Wake(ctx, "engine"))
	require.NoError(t, p.Wake(ctx, "engine"))
	assert.Equal(t, want, readAll(t, r))
	require.NoError(t, p.Sleep(ctx, "weights", sleep.Park))
	require.NoError(t, other.Close(), "closing a parked region")
	require.NoError(t, other.Close(), "twice")
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Offload))
	require.NoError(t, p.Close(), "closing while asleep")
	require.NoError(t, p.Close())
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())
	require.ErrorIs(t, p.Sleep(ctx, "engine", sleep.Park), vmm.ErrClosed)
	_, err = r.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, vmm.ErrClosed)
	require.ErrorIs(t, p.Sleep(ctx, "engine", sleep.Mode(9)), vmm.ErrInvalid)
}

// TestPrepareKeepsPinningOffTheSleep: with Prepare, a sleep creates no memory; the host
// memory stays for the next sleep unless ReleaseHost.
func TestPrepareKeepsPinningOffTheSleep(t *testing.T) {
	ctx := context.Background()
	s, p, _, _ := setup(t)
	require.NoError(t, p.Prepare("engine"))
	creates := s.Stats().Calls[sim.OpCreate.String()]
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Offload))
	assert.Equal(t, creates, s.Stats().Calls[sim.OpCreate.String()], "no memory created on the way to sleep")
	require.NoError(t, p.Wake(ctx, "engine"))
	assert.Equal(t, uint64(10*mib), s.Stats().Host, "the host memory is kept")
	creates = s.Stats().Calls[sim.OpCreate.String()]
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Park))
	assert.Equal(t, creates, s.Stats().Calls[sim.OpCreate.String()])
	require.NoError(t, p.Close())

	s2, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	p2 := sleep.New(vmm.New(s2), sleep.Options{Chunk: 4 * mib, ReleaseHost: true})
	_, err = p2.Alloc("engine", 8*mib, 0)
	require.NoError(t, err)
	require.NoError(t, p2.Sleep(ctx, "engine", sleep.Offload))
	require.NoError(t, p2.Wake(ctx, "engine"))
	assert.Zero(t, s2.Stats().Host, "ReleaseHost gives the host memory back on wake")
	require.NoError(t, p2.Close())
	assert.True(t, s2.Stats().Clean())
}

// TestWakeOutOfMemory: another allocation took the memory; the wake says how much it needs
// and how much is free, the tag still sleeps with its bytes, and a retry after the memory
// is back succeeds.
func TestWakeOutOfMemory(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park} {
		t.Run(mode.String(), func(t *testing.T) {
			s, p, r, want := setup(t)
			require.NoError(t, p.Sleep(ctx, "engine", mode))
			used := s.Stats().Committed[0]
			require.NoError(t, s.SetCapacity(0, used+6*mib)) // room for one chunk and a half
			err := p.Wake(ctx, "engine")
			require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
			assert.Contains(t, err.Error(), "need 6MiB more on device 0, which has 2MiB free")
			st := p.States("engine")
			assert.Equal(t, uint64(4*mib), st[sleep.Resident], "what fitted woke")
			require.NoError(t, s.SetCapacity(0, 141<<30))
			require.NoError(t, p.Wake(ctx, "engine"))
			assert.Equal(t, want, readAll(t, r))
			require.NoError(t, p.Close())
			assert.True(t, s.Stats().Clean())
		})
	}
}

// TestFaultsLeaveItConsistent: a fault at any driver call of a sleep or a wake leaves each
// chunk in a state of its own, a retry finishes the job with every byte, and nothing
// leaks.
func TestFaultsLeaveItConsistent(t *testing.T) {
	ctx := context.Background()
	ops := []sim.Op{sim.OpCreate, sim.OpRelease, sim.OpReserve, sim.OpMap, sim.OpUnmap, sim.OpSetAccess, sim.OpCopyDtoD, sim.OpMemsetD8}
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		for _, op := range ops {
			for n := 1; n <= 3; n++ {
				for _, during := range []string{"sleep", "wake"} {
					t.Run(fmt.Sprintf("%v/%v/%d/%s", mode, op, n, during), func(t *testing.T) {
						s, p, r, want := setup(t)
						if mode == sleep.Discard {
							want = make([]byte, len(want))
						}
						if during == "wake" {
							require.NoError(t, p.Sleep(ctx, "engine", mode))
						}
						require.NoError(t, s.FailNth(op, n, cu.ERROR_UNKNOWN))
						var err error
						if during == "sleep" {
							err = p.Sleep(ctx, "engine", mode)
						} else {
							err = p.Wake(ctx, "engine")
						}
						s.ClearFaults()
						var total uint64
						for _, b := range p.States("engine") {
							total += b
						}
						require.Equal(t, uint64(10*mib), total, "every chunk in one state (%v)", err)
						if during == "sleep" {
							require.NoError(t, p.Sleep(ctx, "engine", mode), "the retry (after %v)", err)
						}
						require.NoError(t, p.Wake(ctx, "engine"), "the wake (after %v)", err)
						assert.True(t, bytes.Equal(want, readAll(t, r)), "the bytes, after %v", err)
						require.NoError(t, p.Close())
						assert.True(t, s.Stats().Clean(), "%+v after %v", s.Stats(), err)
					})
				}
			}
		}
	}
}

// TestCancel: a cancelled context stops a sleep between chunks, consistently.
func TestCancel(t *testing.T) {
	s, p, r, want := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, p.Sleep(ctx, "engine", sleep.Offload), context.Canceled)
	assert.Equal(t, map[sleep.State]uint64{sleep.Resident: 10 * mib}, p.States("engine"))
	require.NoError(t, p.Sleep(context.Background(), "engine", sleep.Offload))
	require.NoError(t, p.Wake(context.Background(), "engine"))
	assert.Equal(t, want, readAll(t, r))
	require.NoError(t, p.Close())
	assert.True(t, s.Stats().Clean())
}

// TestConcurrentUse: reads of one region alongside sleeps and wakes of another tag.
func TestConcurrentUse(t *testing.T) {
	s, p, r, want := setup(t)
	_, err := p.Alloc("kv", 8*mib, 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 20 {
			assert.Equal(t, want[:4096], readAll(t, r)[:4096])
		}
	}()
	go func() {
		defer wg.Done()
		for range 10 {
			assert.NoError(t, p.Sleep(context.Background(), "kv", sleep.Offload))
			assert.NoError(t, p.Wake(context.Background(), "kv"))
		}
	}()
	wg.Wait()
	require.NoError(t, p.Close())
	assert.True(t, s.Stats().Clean())
}
