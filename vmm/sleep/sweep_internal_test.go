package sleep

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

const rmib = 1 << 20

type rig struct {
	s    *sim.Sim
	p    *Pool
	regs []*Region
	want [][]byte
}

// newRig: tag "engine" with regions of 10 MiB (4+4+2), 6 MiB (4+2) and 2 MiB; tag "other" 4 MiB.
func newRig(t *testing.T, opts Options) *rig {
	s, err := sim.New(sim.PresetH200())
	if err != nil {
		t.Fatal(err)
	}
	if opts.Chunk == 0 {
		opts.Chunk = 4 * rmib
	}
	g := &rig{s: s, p: New(vmm.New(s), opts)}
	for i, sz := range []uint64{10 * rmib, 6 * rmib, 2 * rmib} {
		r, err := g.p.Alloc("engine", sz, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := pattern.Bytes(byte(i+3), int(sz))
		if _, err := r.WriteAt(w, 0); err != nil {
			t.Fatal(err)
		}
		g.regs = append(g.regs, r)
		g.want = append(g.want, w)
	}
	if _, err := g.p.Alloc("other", 4*rmib, 0); err != nil {
		t.Fatal(err)
	}
	return g
}

// check verifies each chunk's state against what the simulator holds; Discarded chunks'
// expected bytes become zeros.
func (g *rig) check() []string {
	var bad []string
	m := g.p.m
	for ri, r := range g.regs {
		if r.closed {
			continue
		}
		for _, c := range r.chunks {
			buf := make([]byte, c.size)
			exp := g.want[ri][c.off : c.off+c.size]
			atErr := m.ReadAt(r.dev, buf, r.addr(c))
			switch c.state {
			case Resident:
				if c.dev == nil {
					bad = append(bad, fmt.Sprintf("r%d+%d resident without device memory", ri, c.off>>20))
				}
				if atErr != nil {
					bad = append(bad, fmt.Sprintf("r%d+%d resident but unreadable: %v", ri, c.off>>20, atErr))
				} else if !bytes.Equal(buf, exp) {
					bad = append(bad, fmt.Sprintf("r%d+%d resident with wrong bytes", ri, c.off>>20))
				}
			case Parked:
				if atErr != nil {
					bad = append(bad, fmt.Sprintf("r%d+%d parked but nothing mapped: %v", ri, c.off>>20, atErr))
				} else if !bytes.Equal(buf, exp) {
					bad = append(bad, fmt.Sprintf("r%d+%d parked with wrong bytes", ri, c.off>>20))
				}
				if c.dev != nil {
					bad = append(bad, fmt.Sprintf("r%d+%d parked but holds device memory", ri, c.off>>20))
				}
			case Offloaded:
				if c.host == nil {
					bad = append(bad, fmt.Sprintf("r%d+%d offloaded without host memory", ri, c.off>>20))
				} else if err := m.ReadAt(r.dev, buf, r.staged(c)); err != nil || !bytes.Equal(buf, exp) {
					bad = append(bad, fmt.Sprintf("r%d+%d offloaded, host bytes wrong (%v)", ri, c.off>>20, err))
				}
				if atErr == nil && c.dev == nil {
					bad = append(bad, fmt.Sprintf("r%d+%d offloaded but something is mapped at its addresses", ri, c.off>>20))
				}
			case Discarded:
				for i := range exp {
					exp[i] = 0
				}
				if atErr == nil && c.dev == nil {
					bad = append(bad, fmt.Sprintf("r%d+%d discarded but something is mapped at its addresses", ri, c.off>>20))
				}
			}
		}
	}
	return bad
}

func (g *rig) states() map[State]uint64 { return g.p.States("engine") }

// finish: wake, compare bytes, close, clean.
func (g *rig) finish(ctx context.Context) []string {
	var bad []string
	if err := g.p.Wake(ctx, "engine"); err != nil {
		bad = append(bad, "wake after: "+err.Error())
	}
	bad = append(bad, g.check()...)
	for ri, r := range g.regs {
		if r.closed {
			continue
		}
		got := make([]byte, r.size)
		if _, err := r.ReadAt(got, 0); err != nil {
			bad = append(bad, fmt.Sprintf("read r%d: %v", ri, err))
		} else if !bytes.Equal(got, g.want[ri]) {
			bad = append(bad, fmt.Sprintf("r%d bytes lost", ri))
		}
	}
	if err := g.p.Close(); err != nil {
		bad = append(bad, "close: "+err.Error())
	}
	_ = g.p.m.Pending().Retry()
	if st := g.s.Stats(); !st.Clean() {
		bad = append(bad, fmt.Sprintf("LEAK handles=%d maps=%d resv=%d dev=%v host=%d", st.Handles, st.Mappings, st.Reservations, st.Committed, st.Host))
	}
	return bad
}

type fault struct {
	op sim.Op
	n  int
}

var sweepOps = []sim.Op{sim.OpCreate, sim.OpRelease, sim.OpReserve, sim.OpFree, sim.OpMap, sim.OpUnmap, sim.OpSetAccess, sim.OpCopyDtoD, sim.OpMemsetD8}

func faultSets(maxN int, pairs bool) [][]fault {
	var singles []fault
	for _, op := range sweepOps {
		for n := 1; n <= maxN; n++ {
			singles = append(singles, fault{op, n})
		}
	}
	var sets [][]fault
	for _, f := range singles {
		sets = append(sets, []fault{f})
	}
	if pairs {
		for i, f := range singles {
			for _, h := range singles[i+1:] {
				if f.op != h.op {
					sets = append(sets, []fault{f, h})
				}
			}
		}
	}
	return sets
}

// TestFaultSweep injects every single fault (or, with CUVMM_SLEEP_SWEEP=pairs, every pair
// of faults) of each driver operation, its nth call for n up to 5, into each phase (prepare,
// sleep, wake, a region's close, the pool's close, alloc), each mode, with and without
// ReleaseHost, on three regions of one tag and one of another; then checks that every
// chunk's state matches what is mapped, a retry completes with every byte, and nothing
// leaks. It runs only with CUVMM_SLEEP_SWEEP set: about a minute for the single faults.
func TestFaultSweep(t *testing.T) {
	switch os.Getenv("CUVMM_SLEEP_SWEEP") {
	case "":
		t.Skip("set CUVMM_SLEEP_SWEEP=1 (single faults) or =pairs")
	case "pairs":
		pairsFlag = true
	}
	ctx := context.Background()
	phases := []string{"prepare", "sleep", "sleep-prepared", "wake", "rclose", "pclose", "alloc"}
	if p := os.Getenv("PHASES"); p != "" {
		phases = strings.Split(p, ",")
	}
	modes := []Mode{Offload, Park, Discard}
	for _, keep := range []bool{true, false} {
		for _, phase := range phases {
			for _, mode := range modes {
				t.Run(fmt.Sprintf("keep=%v/%s/%v", keep, phase, mode), func(t *testing.T) {
					t.Parallel()
					results := map[string][]string{}
					for _, fs := range faultSets(maxNFlag, pairsFlag) {
						g := newRig(t, Options{ReleaseHost: !keep})
						p := g.p
						if phase == "sleep-prepared" {
							_ = p.Prepare("engine")
						}
						if phase == "wake" || phase == "rclose" || phase == "pclose" {
							if err := p.Sleep(ctx, "engine", mode); err != nil {
								t.Fatal(err)
							}
							if mode == Discard {
								for _, w := range g.want {
									clear(w)
								}
							}
						}
						for _, f := range fs {
							_ = g.s.FailNth(f.op, f.n, cu.ERROR_UNKNOWN)
						}
						var err error
						switch phase {
						case "prepare":
							err = p.Prepare("engine")
						case "sleep", "sleep-prepared":
							err = p.Sleep(ctx, "engine", mode)
						case "wake":
							err = p.Wake(ctx, "engine")
						case "rclose":
							err = g.regs[1].Close()
						case "pclose":
							err = p.Close()
						case "alloc":
							_, err = p.Alloc("engine", 10*rmib, 0)
						}
						g.s.ClearFaults()
						var bad []string
						bad = append(bad, g.check()...)
						switch phase {
						case "prepare":
							if e := p.Prepare("engine"); e != nil {
								bad = append(bad, "prepare retry: "+e.Error())
							}
						case "sleep", "sleep-prepared":
							if e := p.Sleep(ctx, "engine", mode); e != nil {
								bad = append(bad, "sleep retry: "+e.Error())
							}
							st := map[Mode]State{Offload: Offloaded, Park: Parked, Discard: Discarded}[mode]
							if s := g.states(); s[st] != 18*rmib {
								bad = append(bad, fmt.Sprintf("after a sleep retry that succeeded, not all %v: %v", st, s))
							}
							bad = append(bad, g.check()...)
						case "rclose":
							if e := g.regs[1].Close(); e != nil {
								bad = append(bad, "region close retry: "+e.Error())
							}
						case "pclose":
							if e := p.Close(); e != nil {
								bad = append(bad, "pool close retry: "+e.Error())
							}
						}
						if phase == "rclose" || phase == "pclose" {
							_ = p.Close()
							_ = g.p.m.Pending().Retry()
							if st := g.s.Stats(); !st.Clean() {
								bad = append(bad, fmt.Sprintf("LEAK handles=%d maps=%d resv=%d dev=%v host=%d", st.Handles, st.Mappings, st.Reservations, st.Committed, st.Host))
							}
						} else {
							bad = append(bad, g.finish(ctx)...)
						}
						if len(bad) > 0 && err != nil || len(bad) > 0 {
							key := fmt.Sprintf("keep=%v %s %v", keep, phase, mode)
							desc := fmt.Sprintf("%v: first err=%v => %s", fs, err, strings.Join(uniq(bad), "; "))
							results[key] = append(results[key], desc)
						}
					}
					report(t, results)
				})
			}
		}
	}
}

func report(t *testing.T, results map[string][]string) {
	keys := make([]string, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("== %s: %d failing fault sets", k, len(results[k]))
		// group by the problem text (without the fault set and first error)
		groups := map[string][]string{}
		for _, d := range results[k] {
			i := strings.Index(d, " => ")
			groups[normalize(d[i+4:])] = append(groups[normalize(d[i+4:])], d[:i])
		}
		for prob, sets := range groups {
			t.Logf("   %d× %s\n      e.g. %s", len(sets), prob, sets[0])
		}
	}
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func normalize(s string) string {
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

var pairsFlag = false
var maxNFlag = 5
