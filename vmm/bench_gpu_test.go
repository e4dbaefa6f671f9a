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
// bench/c/callcost.c. Each operation's mean is reported as its own metric (ns/create,
// ns/map, ...). The side-by-side comparison with C is bench/cgo's BenchmarkOpsAB, which
// interleaves the two in one process: between separate runs the driver's own times drift
// by more than the difference being measured.
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
			// One monotonic clock read per boundary (time.Since of a base: the runtime's
			// nanotime, one vDSO clock_gettime), as the C loop reads clock_gettime once;
			// time.Now reads the wall clock as well.
			base := time.Now()
			now := func() time.Time { return base.Add(time.Since(base)) }
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
