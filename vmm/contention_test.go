package vmm_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// contend has owners create, sometimes map, and release handles of their own while users
// map, export, query and retain the same handles from other goroutines: a call on a handle
// whose last reference is gone must fail with CUDA_ERROR_INVALID_VALUE every time, any
// other call must succeed, and nothing may deadlock. It returns how many calls were
// refused and how many accepted; the caller checks what the backend holds afterwards.
func contend(t *testing.T, be vmm.Backend, exportable bool) (refused, accepted int64) {
	t.Helper()
	g, err := be.Granularity(&cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: vmm.OnDevice(0)}, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
	if err != nil {
		t.Fatal(err)
	}
	p := vmm.DeviceProps(0)
	if exportable {
		p.HandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	}
	prop := p.Driver()
	const owners, users, rounds = 4, 4, 40
	var released sync.Map
	var nRefused, nAccepted atomic.Int64
	// Every fourth round an owner waits (a second at most) until a user has made its first
	// call on the handle before releasing it, so that some calls are accepted however the
	// goroutines are scheduled; the other rounds race freely.
	type offer struct {
		h    cu.MemHandle
		seen chan struct{} // closed by the user after its first call; nil: no wait
	}
	pool := make(chan offer, 64)
	var owning, using sync.WaitGroup
	stop := make(chan struct{})
	for o := range owners {
		owning.Go(func() {
			va, err := be.Reserve(g, 0, 0, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer be.Free(va, g)
			for i := range rounds {
				h, err := be.Create(g, &prop, 0)
				if err != nil {
					t.Error(err)
					return
				}
				of := offer{h: h}
				if i%4 == 0 {
					of.seen = make(chan struct{})
				}
				select {
				case pool <- of:
				default:
					of.seen = nil
				}
				mapped := (o+i)%2 == 0
				if mapped {
					if err := be.Map(va, g, 0, h, 0); err != nil {
						t.Error(err)
						return
					}
				}
				time.Sleep(time.Duration(i%3) * 20 * time.Microsecond)
				if of.seen != nil {
					select {
					case <-of.seen:
					case <-time.After(time.Second):
					}
				}
				if err := be.Release(h); err != nil {
					t.Error(err)
					return
				}
				released.Store(h, true)
				if mapped {
					if err := be.Unmap(va, g); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	for range users {
		using.Go(func() {
			va, err := be.Reserve(g, 0, 0, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer be.Free(va, g)
			for {
				var of offer
				select {
				case of = <-pool:
				case <-stop:
					return
				}
				h := of.h
				for k := range 6 {
					_, wasReleased := released.Load(h)
					var err error
					switch k % 3 {
					case 0:
						if err = be.Map(va, g, 0, h, 0); err == nil {
							// While it is mapped, a retain returns a reference of the user's
							// own, whatever the owner does meanwhile.
							r, rerr := be.Retain(va)
							if rerr != nil {
								t.Errorf("retain of a mapped range: %v", rerr)
							} else if rerr = be.Release(r); rerr != nil {
								t.Errorf("release of a retained handle: %v", rerr)
							}
							err = be.Unmap(va, g)
						}
					case 1:
						if !exportable {
							continue
						}
						var fd int
						if fd, err = be.ExportFD(h); err == nil {
							closeFD(fd)
						}
					case 2:
						_, err = be.Properties(h)
					}
					switch {
					case err == nil && wasReleased:
						t.Errorf("call %d on released handle %v succeeded", k, h)
					case err == nil:
						nAccepted.Add(1)
					case errors.Is(err, cu.ERROR_INVALID_VALUE):
						nRefused.Add(1)
					default:
						t.Errorf("call %d on %v: %v", k, h, err)
					}
					if k == 0 && of.seen != nil {
						close(of.seen)
					}
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { owning.Wait(); close(stop); using.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("deadlock: the goroutines did not finish")
	}
	if nRefused.Load() == 0 || nAccepted.Load() == 0 {
		t.Errorf("refused %d, accepted %d: the calls did not race the releases", nRefused.Load(), nAccepted.Load())
	}
	t.Logf("refused %d, accepted %d", nRefused.Load(), nAccepted.Load())
	return nRefused.Load(), nAccepted.Load()
}

func TestContention(t *testing.T) {
	s := newSim(t)
	contend(t, s, true)
	if st := s.Stats(); !st.Clean() {
		t.Fatalf("leaked: %+v", st)
	}
}
