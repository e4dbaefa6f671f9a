package kv_test

import (
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
	"github.com/stretchr/testify/require"
)

// llama3 is vAttention's Figure 11 setup: Llama-3-8B (32 layers x K and V, 8 KV heads of
// 128 in fp16: 2 KiB a token a plane), 2 MiB pages, at most 64 requests in a batch and
// 32768 tokens a request.
var llama3 = kv.Geometry{Planes: 64, BytesPerToken: 2048, Slots: 64, MaxTokens: 32768}

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

// replayBench replays the first 300 requests of vAttention's Figure 11 trace: at
// most 64 requests at once, a new one admitted (its prompt's tokens at once) as one
// finishes, every active request one token more a step, a step of CUVMM_KV_STEP (10ms by
// default) of simulated compute. Ensure is the step path: the time of a step's Ensure calls
// (one per request in the batch) is the step's wait;
// its driver calls are counted after the first step (warm-up). ahead=0 is synchronous
// (no committer), ahead=2 keeps two pages ahead of every slot.
func replayBench(b *testing.B, m *vmm.Manager) {
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
					var err error
					for s, a := range slots {
						if a != nil {
							if err = c.Ensure(s, a.tokens); err != nil {
								break
							}
						}
					}
					wait := time.Since(w0)
					require.NoError(b, err) // after the clock: testify's checks cost 110 ns each
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
				if path := os.Getenv("CUVMM_KV_CSV"); path != "" {
					label := "synchronous (Ahead 0)"
					if ahead > 0 {
						label = fmt.Sprintf("committer (Ahead %d)", ahead)
					}
					rows := [][]string{}
					for _, r := range []struct {
						group string
						v     float64
					}{{"step-path wait per step, p50", q(0.5)}, {"p99", q(0.99)}, {"max", float64(waits[len(waits)-1].Nanoseconds())}} {
						rows = append(rows, []string{r.group, label, strconv.FormatFloat(r.v/1000, 'f', 1, 64)})
					}
					require.NoError(b, appendCSV(path, rows))
				}
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

// appendCSV adds rows to the CSV at path (group,label,value: bench/plot -bars), writing
// the header first into an empty file.
func appendCSV(path string, rows [][]string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		_ = w.Write([]string{"group", "label", "value"})
	}
	_ = w.WriteAll(rows)
	return errors.Join(w.Error(), f.Close())
}

// BenchmarkReplay is the replay on the simulator: the step path's own cost, with driver
// calls that take no time (CUVMM_KV_STEP sets the step, 10ms by default).
func BenchmarkReplay(b *testing.B) {
	s, err := sim.New(sim.PresetH200())
	require.NoError(b, err)
	replayBench(b, vmm.New(s))
}
