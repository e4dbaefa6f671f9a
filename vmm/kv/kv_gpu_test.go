//go:build gpu

package kv_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
	"github.com/stretchr/testify/require"
)

// llama3 is vAttention's Figure 11 setup: Llama-3-8B (32 layers x K and V, 8 KV heads of
// 128 in fp16: 2 KiB a token a plane), 2 MiB pages, at most 64 requests in a batch and
// 32768 tokens a request.
var llama3 = kv.Geometry{Planes: 64, BytesPerToken: 2048, Slots: 64, MaxTokens: 32768}

func cudaOrSkip(t testing.TB) *vmm.Manager {
	t.Helper()
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	return vmm.New(b)
}

type request struct{ prefill, decode int }

func trace(t testing.TB) []request {
	f, err := os.Open("testdata/vattention-fig11-300.csv")
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	var reqs []request
	for _, r := range rows[1:] {
		p, err1 := strconv.Atoi(r[0])
		d, err2 := strconv.Atoi(r[1])
		require.NoError(t, errors.Join(err1, err2))
		reqs = append(reqs, request{p, d})
	}
	return reqs
}

// BenchmarkGPUCommitPageIndex is the cost of committing one 2 MiB page index across the 64
// planes, synchronously (64 creates, 64 maps, 64 set-access calls), one slot after another.
func BenchmarkGPUCommitPageIndex(b *testing.B) {
	m := cudaOrSkip(b)
	c, err := kv.New(m, llama3, kv.Options{})
	require.NoError(b, err)
	defer c.Close()
	b.ResetTimer()
	for i := range b.N {
		slot := i % llama3.Slots
		if slot == 0 && i > 0 {
			b.StopTimer()
			for s := range llama3.Slots {
				c.Release(s)
			}
			require.NoError(b, c.Trim())
			b.StartTimer()
		}
		require.NoError(b, c.Ensure(slot, 1))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page-index")
}

// BenchmarkGPUReplay replays the first 300 requests of vAttention's Figure 11 trace: at
// most 64 requests at once, a new one admitted (its prompt's tokens at once) as one
// finishes, every active request one token more a step, a step of CUVMM_KV_STEP (10ms by
// default) of simulated compute. Ensure is the step path: the time of a step's Ensure calls
// (one per request in the batch) is the step's wait;
// its driver calls are counted after the first step (warm-up). ahead=0 is synchronous
// (no committer), ahead=2 keeps two pages ahead of every slot.
func BenchmarkGPUReplay(b *testing.B) {
	m := cudaOrSkip(b)
	reqs := trace(b)
	step := 10 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("CUVMM_KV_STEP")); err == nil {
		step = d
	}
	for _, ahead := range []int{0, 2} {
		b.Run("ahead="+strconv.Itoa(ahead), func(b *testing.B) {
			for range b.N {
				c, err := kv.New(m, llama3, kv.Options{Ahead: ahead})
				require.NoError(b, err)
				require.NoError(b, c.Ready())
				type active struct {
					req    request
					tokens int
				}
				slots := make([]*active, llama3.Slots)
				next, done := 0, 0
				var waits []time.Duration
				var callsAfterWarmup, peakPages, peakBound int
				for steps := 0; done < len(reqs); steps++ {
					t0 := time.Now()
					inUse := 0
					for s := range slots {
						if a := slots[s]; a == nil && next < len(reqs) {
							slots[s], next = &active{req: reqs[next], tokens: reqs[next].prefill}, next+1
						} else if a != nil {
							a.tokens++
						}
					}
					// The step path: one Ensure per request of the batch, timed as one.
					w0 := time.Now()
					for s, a := range slots {
						if a != nil {
							require.NoError(b, c.Ensure(s, a.tokens))
						}
					}
					wait := time.Since(w0)
					for s, a := range slots {
						if a == nil {
							continue
						}
						inUse += (a.tokens*2048 + 2<<20 - 1) / (2 << 20)
						if a.tokens >= a.req.prefill+a.req.decode {
							c.Release(s)
							slots[s], done = nil, done+1
						}
					}
					st := c.Stats()
					if steps == 0 {
						callsAfterWarmup = -st.StepCalls
					}
					waits = append(waits, wait)
					peakPages = max(peakPages, st.Pages)
					peakBound = max(peakBound, inUse+ahead*llama3.Slots)
					for time.Since(t0) < step {
						// The step's compute: a serving loop waits for its kernels
						// spinning (as cudaStreamSynchronize does by default), and a
						// sleeping thread would wake cold.
					}
				}
				st := c.Stats()
				callsAfterWarmup += st.StepCalls
				require.NoError(b, c.Close())
				slices.Sort(waits)
				q := func(p float64) float64 { return float64(waits[int(p*float64(len(waits)-1))].Nanoseconds()) }
				b.ReportMetric(float64(len(waits)), "steps")
				b.ReportMetric(q(0.5), "wait-p50-ns")
				b.ReportMetric(q(0.99), "wait-p99-ns")
				b.ReportMetric(float64(waits[len(waits)-1].Nanoseconds()), "wait-max-ns")
				b.ReportMetric(float64(callsAfterWarmup), "step-calls-after-warmup")
				b.ReportMetric(float64(st.StepCommits), "step-commits")
				b.ReportMetric(float64(st.Commits), "commits")
				b.ReportMetric(float64(peakPages), "peak-pages")
				b.ReportMetric(float64(peakBound), "bound-pages")
			}
		})
	}
}

// TestGPUCache: a page index committed across 64 planes holds what each plane's tensor
// writes; trimming and closing give every page back (live handles before and after).
func TestGPUCache(t *testing.T) {
	m := cudaOrSkip(t)
	handles, _ := cu.LiveHandles()
	free0, _, err := m.MemInfo(0)
	require.NoError(t, err)
	c, err := kv.New(m, llama3, kv.Options{Ahead: 1})
	require.NoError(t, err)
	require.NoError(t, c.Ready())
	require.NoError(t, c.Ensure(5, 3000)) // 3 pages
	for i := range llama3.Planes {
		addr := c.Plane(i) + cu.DevicePtr(5*c.SlotBytes())
		want := pattern.Bytes(byte(i), 3000*2048)
		require.NoError(t, m.WriteAt(0, want, addr))
		got := make([]byte, len(want))
		require.NoError(t, m.ReadAt(0, got, addr))
		require.True(t, bytes.Equal(want, got), "plane %d", i)
	}
	c.Release(5)
	require.NoError(t, c.Close())
	free1, _, err := m.MemInfo(0)
	require.NoError(t, err)
	require.Equal(t, free0, free1, "every page given back")
	after, _ := cu.LiveHandles()
	require.Equal(t, handles, after)
}
