package sim_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
)

// TestReleasedHandleRefusedUnderContention has goroutines map, export, retain and query a
// pool of handles while their owners release them: a call on a handle whose last
// reference is gone must fail every time, every call must reach sim and be counted, and
// nothing may be left behind.
func TestReleasedHandleRefusedUnderContention(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	const owners, users, rounds = 4, 4, 60
	var released sync.Map // handle -> true once its last reference is gone
	var refused, accepted, calls atomic.Int64
	pool := make(chan cu.MemHandle, 64)
	var wg sync.WaitGroup
	deadline := time.Now().Add(30 * time.Second)
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			va, err := s.Reserve(2*mib, 0, 0, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Free(va, 2*mib)
			for i := range rounds {
				h, err := s.Create(2*mib, devProp(0, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), 0)
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case pool <- h:
				default:
				}
				if (o+i)%2 == 0 { // sometimes mapped, so the memory outlives the release
					if err := s.Map(va, 2*mib, 0, h, 0); err != nil {
						t.Error(err)
						return
					}
				}
				time.Sleep(time.Duration(i%3) * 10 * time.Microsecond)
				if err := s.Release(h); err != nil {
					t.Error(err)
					return
				}
				released.Store(h, true)
				if (o+i)%2 == 0 {
					if err := s.Unmap(va, 2*mib); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	var uwg sync.WaitGroup
	stop := make(chan struct{})
	for range users {
		uwg.Add(1)
		go func() {
			defer uwg.Done()
			va, err := s.Reserve(2*mib, 0, 0, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Free(va, 2*mib)
			for time.Now().Before(deadline) {
				var h cu.MemHandle
				select {
				case h = <-pool:
				case <-stop:
					return
				}
				for k := range 8 {
					_, wasReleased := released.Load(h)
					var err error
					calls.Add(1)
					switch k % 4 {
					case 0:
						if err = s.Map(va, 2*mib, 0, h, 0); err == nil {
							err = s.Unmap(va, 2*mib)
						}
					case 1:
						var fd int
						if fd, err = s.ExportFD(h); err == nil {
							closeFD(fd)
						}
					case 2:
						_, err = s.Properties(h)
					case 3:
						// A retain of the user's own range: it names no handle, and finds
						// nothing mapped there between the map and unmap above.
						if r, err := s.Retain(va); err == nil {
							t.Errorf("retain of an unmapped range returned %v", r)
						}
						continue
					}
					switch {
					case err == nil && wasReleased:
						t.Errorf("call %d on released handle %v succeeded", k, h)
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, cu.ERROR_INVALID_VALUE):
						refused.Add(1)
					default:
						t.Errorf("call %d on %v: %v", k, h, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	uwg.Wait()
	st := s.Stats()
	require.True(t, st.Clean(), "%+v", st)
	reached := st.Calls["Map"] + st.Calls["ExportFD"] + st.Calls["Properties"] + st.Calls["Retain"]
	require.GreaterOrEqual(t, reached, uint64(calls.Load()), "every call reaches sim and is counted")
	require.Positive(t, refused.Load(), "no call hit a released handle: the test did not exercise the race")
	require.Positive(t, accepted.Load())
	t.Logf("calls %d, accepted %d, refused %d", calls.Load(), accepted.Load(), refused.Load())
}

// TestSpanningOperationsRaceLocalOnes runs operations on ranges that span two reservations
// alongside operations inside each reservation and reservations coming and going
// elsewhere; the state must stay consistent and nothing may leak or deadlock.
func TestSpanningOperationsRaceLocalOnes(t *testing.T) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	const rounds = 100
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Two adjacent reservations (the hint makes the second follow the first). The
			// other goroutines' churn can take the range after a between the two calls, as
			// any other thread can on the driver: then both go back and the pair is tried
			// again somewhere else.
			var a, b cu.DevicePtr
			for try := 0; ; try++ {
				// An 8 MiB reservation finds room for both; its two halves are then asked for.
				room, err := s.Reserve(8*mib, 0, 0, 0)
				if err != nil {
					t.Error(err)
					return
				}
				s.Free(room, 8*mib)
				a, err = s.Reserve(4*mib, 0, room, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if b, err = s.Reserve(4*mib, 0, a+4*mib, 0); err == nil && b == a+4*mib {
					break
				}
				if err == nil {
					s.Free(b, 4*mib)
				}
				s.Free(a, 4*mib)
				if try == 100 {
					t.Errorf("adjacent reservation: %v at %v, want %v, 100 times", err, b, a+4*mib)
					return
				}
			}
			defer s.Free(a, 4*mib)
			defer s.Free(b, 4*mib)
			big, err := s.Create(4*mib, devProp(0, 0), 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Release(big)
			small, err := s.Create(2*mib, devProp(0, 0), 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Release(small)
			for i := range rounds {
				// A mapping of 4 MiB at a+2MiB runs into b (allowed, recorded: vmmtest map/across-reservations).
				if err := s.Map(a+2*mib, 4*mib, 0, big, 0); err != nil {
					t.Errorf("goroutine %d round %d: crossing map: %v", g, i, err)
					return
				}
				// b's first 2 MiB are taken by the crosser: mapping there must fail.
				if err := s.Map(b, 2*mib, 0, small, 0); err == nil {
					t.Errorf("goroutine %d round %d: map over a crosser succeeded", g, i)
					return
				}
				if err := s.Map(b+2*mib, 2*mib, 0, small, 0); err != nil {
					t.Errorf("goroutine %d round %d: map after the crosser: %v", g, i, err)
					return
				}
				// One set access over the crosser and its neighbour, across the boundary.
				if err := s.SetAccess(a+2*mib, 6*mib, rwDesc(0)); err != nil {
					t.Errorf("goroutine %d round %d: set access across: %v", g, i, err)
					return
				}
				want := pattern(byte(g*7+i), 64<<10) // across the boundary between a and b
				if err := s.CopyHtoD(0, a+4*mib-32<<10, want); err != nil {
					t.Errorf("goroutine %d round %d: copy across: %v", g, i, err)
					return
				}
				got := make([]byte, len(want))
				if err := s.CopyDtoH(0, got, a+4*mib-32<<10); err != nil || string(got) != string(want) {
					t.Errorf("goroutine %d round %d: read back across: %v", g, i, err)
					return
				}
				if err := s.Free(b, 4*mib); err == nil {
					t.Errorf("goroutine %d round %d: freed a reservation with a crosser in it", g, i)
					return
				}
				// One unmap across both reservations.
				if err := s.Unmap(a+2*mib, 6*mib); err != nil {
					t.Errorf("goroutine %d round %d: unmap across: %v", g, i, err)
					return
				}
				// Churn elsewhere: reservations placed and freed while the above runs.
				if c, err := s.Reserve(2*mib, 0, 0, 0); err == nil {
					s.Free(c, 2*mib)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("deadlock: the goroutines did not finish")
	}
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// TestCopiesRaceUnmapAndRelease copies megabytes through a mapping (which moves the bytes
// without the Sim's lock) while another goroutine unmaps, releases and replaces the memory
// behind it, and multicast replicas are bound and unbound: a copy either fails as unmapped
// or moves its bytes into memory it still holds, and nothing is left once all is done.
func TestCopiesRaceUnmapAndRelease(t *testing.T) {
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	const size = 8 * mib
	va, err := s.Reserve(size, 0, 0, 0)
	require.NoError(t, err)
	mcva, err := s.Reserve(size, 0, 0, 0)
	require.NoError(t, err)
	mc, err := s.MulticastCreate(&cu.MulticastObjectProp{NumDevices: 2, Size: size})
	require.NoError(t, err)
	require.NoError(t, s.MulticastAddDevice(mc, 0))
	require.NoError(t, s.MulticastAddDevice(mc, 1))
	require.NoError(t, s.Map(mcva, size, 0, mc, 0))
	require.NoError(t, s.SetAccess(mcva, size, rwDesc(0)))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var copied atomic.Int64
	for g := range 2 {
		wg.Go(func() {
			buf := pattern(byte(g), size/2)
			got := make([]byte, size/2)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, at := range []cu.DevicePtr{va, mcva} {
					err := s.CopyHtoD(0, at+cu.DevicePtr(g)*size/2, buf)
					if err == nil {
						err = s.CopyDtoH(0, got, at+cu.DevicePtr(g)*size/2)
					}
					if err == nil {
						err = s.CopyDtoD(0, at, at+size/4, size/2)
					}
					if err == nil {
						err = s.MemsetD8(0, at+size/4, byte(g), size/2)
					}
					if err == nil {
						copied.Add(1)
					} else if !errors.Is(err, cu.ERROR_INVALID_VALUE) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	for i := range 200 {
		h, err := s.Create(size, devProp(0, 0), 0)
		require.NoError(t, err)
		require.NoError(t, s.Map(va, size, 0, h, 0))
		require.NoError(t, s.SetAccess(va, size, rwDesc(0)))
		require.NoError(t, s.Release(h)) // the mapping keeps it
		r, err := s.Create(size, devProp(i%2, 0), 0)
		require.NoError(t, err)
		require.NoError(t, s.MulticastBindMem(mc, 0, r, 0, size, 0))
		require.NoError(t, s.Release(r)) // the binding keeps it
		time.Sleep(50 * time.Microsecond)
		require.NoError(t, s.MulticastUnbind(mc, i%2, 0, size))
		require.NoError(t, s.Unmap(va, size))
	}
	close(stop)
	wg.Wait()
	require.NoError(t, s.Unmap(mcva, size))
	require.NoError(t, s.Release(mc))
	require.NoError(t, s.Free(va, size))
	require.NoError(t, s.Free(mcva, size))
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	t.Logf("%d copies went through", copied.Load())
}

// BenchmarkCycleGoroutines runs the 2 MiB cycle (create, reserve, map, set access, unmap,
// free, release) from 1 and 8 goroutines at once, and, as "own", the same without the
// reservation, each goroutine mapping into a reservation of its own (the pattern of a
// server's request goroutines). ns/op is wall time per cycle of all goroutines together:
// what the Sim's one lock costs under contention, as the driver's serialization does.
func BenchmarkCycleGoroutines(b *testing.B) {
	for _, own := range []bool{false, true} {
		for _, g := range []int{1, 8} {
			name := fmt.Sprintf("cycle/%d", g)
			if own {
				name = fmt.Sprintf("own/%d", g)
			}
			b.Run(name, func(b *testing.B) {
				s, err := sim.New(sim.PresetH200())
				if err != nil {
					b.Fatal(err)
				}
				prop, desc := devProp(0, 0), rwDesc(0)
				n := int64(b.N)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for range g {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var va cu.DevicePtr
						if own {
							va, _ = s.Reserve(2*mib, 0, 0, 0)
						}
						// Cycles are taken 16 at a time, so that the count shared by the
						// goroutines costs little beside the Sim's own work.
						for lo := next.Add(16) - 16; lo < n; lo = next.Add(16) - 16 {
							for range min(16, n-lo) {
								if own {
									ownCycle(b, s, va, prop, desc)
								} else {
									cycle(b, s, prop, desc)
								}
							}
						}
						if own {
							s.Free(va, 2*mib)
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// ownCycle is cycle inside a reservation the caller holds.
func ownCycle(b *testing.B, s *sim.Sim, va cu.DevicePtr, prop *cu.MemAllocationProp, desc []cu.MemAccessDesc) {
	h, err := s.Create(2*mib, prop, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Map(va, 2*mib, 0, h, 0); err != nil {
		b.Fatal(err)
	}
	if err := s.SetAccess(va, 2*mib, desc); err != nil {
		b.Fatal(err)
	}
	if err := s.Unmap(va, 2*mib); err != nil {
		b.Fatal(err)
	}
	if err := s.Release(h); err != nil {
		b.Fatal(err)
	}
}
