package buffer_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
)

// benchBackend is the simulator, or the real driver with CUVMM_BACKEND=cuda (the benchmark
// skips if there is none).
func benchBackend(b *testing.B) vmm.Backend {
	if os.Getenv("CUVMM_BACKEND") == "cuda" {
		be, err := vmm.CUDA()
		if errors.Is(err, loader.ErrNoDriver) {
			b.Skipf("no CUDA driver: %v", err)
		}
		if err != nil {
			b.Fatal(err)
		}
		return be
	}
	s, err := sim.New(sim.PresetH100())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func envUint(name string, def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkGrow grows one buffer to TOTAL in STEP increments, as ../../../shared/bench/grow.c
// does in C (CUVMM_GROW_TOTAL_GIB, default 1, and CUVMM_GROW_STEP_MIB, default 64; run
// `grow 16 64` and `grow 4 2` against CUVMM_GROW_TOTAL_GIB=16 CUVMM_GROW_STEP_MIB=64 and 4/2):
//
//   - reserved: the whole address range reserved up front, one STEP chunk per growth
//     (grow.c's vmm_reserved);
//   - doubling: STEP reserved, one STEP chunk per growth, the range doubled with the
//     fixed-address hint or remapped when it is refused (grow.c's vmm_doubling);
//   - geometric: the default policy (chunks double; O(log n) driver calls).
//
// ns/op is the growth; teardown-ns/op the Close; calls/op the driver calls of both.
func BenchmarkGrow(b *testing.B) {
	be := benchBackend(b)
	m := vmm.New(be)
	total := envUint("CUVMM_GROW_TOTAL_GIB", 1) << 30
	step := envUint("CUVMM_GROW_STEP_MIB", 64) << 20
	cases := []struct {
		name string
		opts buffer.Options
	}{
		{"reserved", buffer.Options{Policy: buffer.Exact, MinChunk: step, Reserve: total}},
		{"doubling", buffer.Options{Policy: buffer.Exact, MinChunk: step, Reserve: step}},
		{"geometric", buffer.Options{Policy: buffer.Geometric, MinChunk: step, Reserve: step}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/backend=%s/total=%dGiB/step=%dMiB", c.name, be.Name(), total>>30, step>>20)
		b.Run(name, func(b *testing.B) {
			var teardown time.Duration
			var calls, remaps, extends, chunks int
			for b.Loop() {
				buf, err := buffer.New(m, 0, c.opts)
				if err != nil {
					b.Fatal(err)
				}
				for size := step; size <= total; size += step {
					if err := buf.Grow(size); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				st := buf.Stats()
				t0 := time.Now()
				if err := buf.Close(); err != nil {
					b.Fatal(err)
				}
				teardown += time.Since(t0)
				st2 := buf.Stats()
				calls += st2.Calls
				remaps += st.Remaps
				extends += st.Extends
				chunks += st.Chunks
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(teardown.Nanoseconds())/n, "teardown-ns/op")
			b.ReportMetric(float64(calls)/n, "calls/op")
			b.ReportMetric(float64(chunks)/n, "chunks/op")
			b.ReportMetric(float64(extends)/n, "extends/op")
			b.ReportMetric(float64(remaps)/n, "remaps/op")
		})
	}
}
