//go:build gpu

package vmm_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// BenchmarkGPUOps times each VMM operation through the real backend, the same sequence as
// bench/c/callcost.c, so that the two can be compared side by side. Each operation's mean
// is reported as its own metric (ns/create, ns/map, ...).
//
// The goroutine is locked to its OS thread, as the C loop runs on one: otherwise, after a
// call that blocks long enough (cuMemSetAccess, cuMemUnmap), the scheduler may move the
// goroutine to another thread and core, and the next short call (cuMemMap) pays for cold
// caches. CUVMM_OPS_UNLOCKED=1 measures without the lock.
func BenchmarkGPUOps(b *testing.B) {
	be := cudaOrSkip(b)
	if os.Getenv("CUVMM_OPS_UNLOCKED") != "1" {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	prop := &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}}
	desc := vmm.ReadWrite(0)
	for _, size := range []uint64{2 << 20, 64 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			var tc, tm, ta, tu, tr time.Duration
			base := time.Now()
			now := func() time.Time { return base.Add(time.Since(base)) }
			if os.Getenv("CUVMM_OPS_CLOCK") == "now" {
				now = time.Now
			}
			for b.Loop() {
				va, err := be.Reserve(size, 0, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				t0 := now()
				h, err := be.Create(size, prop, 0)
				t1 := now()
				if err != nil {
					b.Fatal(err)
				}
				if err := be.Map(va, size, 0, h, 0); err != nil {
					b.Fatal(err)
				}
				t2 := now()
				if err := be.SetAccess(va, size, desc); err != nil {
					b.Fatal(err)
				}
				t3 := now()
				if err := be.Unmap(va, size); err != nil {
					b.Fatal(err)
				}
				t4 := now()
				if err := be.Release(h); err != nil {
					b.Fatal(err)
				}
				t5 := now()
				if err := be.Free(va, size); err != nil {
					b.Fatal(err)
				}
				tc += t1.Sub(t0)
				tm += t2.Sub(t1)
				ta += t3.Sub(t2)
				tu += t4.Sub(t3)
				tr += t5.Sub(t4)
			}
			n := float64(b.N)
			b.ReportMetric(float64(tc.Nanoseconds())/n, "ns/create")
			b.ReportMetric(float64(tm.Nanoseconds())/n, "ns/map")
			b.ReportMetric(float64(ta.Nanoseconds())/n, "ns/setaccess")
			b.ReportMetric(float64(tu.Nanoseconds())/n, "ns/unmap")
			b.ReportMetric(float64(tr.Nanoseconds())/n, "ns/release")
		})
	}
}

// BenchmarkGPUOpsBatch is "callcost N batch" of bench/c/callcost.c: k chunks of one size,
// every create, then every map (into one reservation), every set access, every unmap and
// every release, each phase timed as a whole, so that no clock read falls inside a phase.
func BenchmarkGPUOpsBatch(b *testing.B) {
	be := cudaOrSkip(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prop := &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}}
	desc := vmm.ReadWrite(0)
	for _, c := range []struct {
		size uint64
		k    int
	}{{2 << 20, 512}, {64 << 20, 64}, {1 << 30, 8}} {
		b.Run(fmt.Sprintf("%dMiB", c.size>>20), func(b *testing.B) {
			var t [5]time.Duration
			hs := make([]cu.MemHandle, c.k)
			for b.Loop() {
				va, err := be.Reserve(c.size*uint64(c.k), 0, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				at := func(i int) cu.DevicePtr { return va + cu.DevicePtr(uint64(i)*c.size) }
				t0 := time.Now()
				for i := range hs {
					if hs[i], err = be.Create(c.size, prop, 0); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				for i, h := range hs {
					if err := be.Map(at(i), c.size, 0, h, 0); err != nil {
						b.Fatal(err)
					}
				}
				t2 := time.Now()
				for i := range hs {
					if err := be.SetAccess(at(i), c.size, desc); err != nil {
						b.Fatal(err)
					}
				}
				t3 := time.Now()
				for i := range hs {
					if err := be.Unmap(at(i), c.size); err != nil {
						b.Fatal(err)
					}
				}
				t4 := time.Now()
				for _, h := range hs {
					if err := be.Release(h); err != nil {
						b.Fatal(err)
					}
				}
				t5 := time.Now()
				if err := be.Free(va, c.size*uint64(c.k)); err != nil {
					b.Fatal(err)
				}
				t[0] += t1.Sub(t0)
				t[1] += t2.Sub(t1)
				t[2] += t3.Sub(t2)
				t[3] += t4.Sub(t3)
				t[4] += t5.Sub(t4)
			}
			n := float64(b.N * c.k)
			for i, m := range []string{"ns/create", "ns/map", "ns/setaccess", "ns/unmap", "ns/release"} {
				b.ReportMetric(float64(t[i].Nanoseconds())/n, m)
			}
		})
	}
}
