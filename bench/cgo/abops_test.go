package cgo

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// BenchmarkOpsAB compares the per-operation cost of the VMM calls made four ways, in one
// process and interleaved so that the driver's drift over time (a 2 MiB create took 9 µs
// in one pass and 27 µs in the next on an H100) falls on all of them alike:
//
//   - c: the whole cycle or batch as C code, every driver call and clock read in C;
//   - cgo: a minimal cgo binding, Go crossing into C once per driver call;
//   - cuvmm: the vmm backend of this module, no cgo (its call path is runtime.cgocall into
//     an assembly trampoline, the same in this cgo-enabled binary as without cgo);
//   - cgo-ctimed: the cgo binding with each driver call timed in C around the call alone,
//     which tells the driver's own time when called from Go from the cost of getting there.
//
// Each iteration runs the four in a rotating order. "cycle" is bench/c/callcost.c's
// sequence (reserve, create, map, set access, unmap, release, free of one chunk, each
// operation timed); "batch" creates k chunks, maps them all into one reservation, sets
// access on each, unmaps each and releases each, each phase timed as a whole.
//
// bench/run.sh runs it and tabulates the result. Besides the usual benchmark line it prints
// one line per phase and way:
//
//	ab <mode>/<size> <phase> <way> mean <ns> median <ns> ratio-of-means <x> median-paired-ratio <x> n <iterations> over-cgo-paired <ns>
//
// where the ratios are over c, and the paired ratio is taken per iteration before the
// median, so that it compares calls made moments apart; over-cgo-paired is the median of
// the per-iteration differences to cgo, in ns (issue 30's "map within cgo + 400 ns"), which
// the driver's drift between iterations moves far less than a difference of medians.
func BenchmarkOpsAB(b *testing.B) {
	load(b)
	if err := ABLoad(); err != nil {
		b.Fatal(err)
	}
	be, err := vmm.CUDA()
	if err != nil {
		b.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cases := []struct {
		mode string
		size uint64
		k    int
	}{
		{"cycle", 2 << 20, 1}, {"cycle", 64 << 20, 1}, {"cycle", 1 << 30, 1},
		{"batch", 2 << 20, 512}, {"batch", 64 << 20, 64}, {"batch", 1 << 30, 8},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s/%dMiB", c.mode, c.size>>20), func(b *testing.B) {
			ways := []func() ([5]int64, error){
				func() ([5]int64, error) {
					if c.mode == "cycle" {
						return CCycle(c.size)
					}
					return CBatch(c.size, c.k)
				},
				func() ([5]int64, error) { return goRun[uint64](Binding{}, c.size, c.k) },
				func() ([5]int64, error) { return goRun[cu.MemHandle](vmmOps{be}, c.size, c.k) },
				func() ([5]int64, error) { return goRun[uint64](TimedBinding{}, c.size, c.k) },
			}
			names := []string{"c", "cgo", "cuvmm", "cgo-ctimed"}
			samples := make([][5][]float64, len(ways))
			i := 0
			for b.Loop() {
				for j := range ways {
					w := (i + j) % len(ways)
					t, err := ways[w]()
					if err != nil {
						b.Fatal(err)
					}
					for p := range t {
						samples[w][p] = append(samples[w][p], float64(t[p])/float64(c.k))
					}
				}
				i++
			}
			for p, phase := range Phases {
				for w, name := range names {
					s := samples[w][p]
					ratios, overCgo := make([]float64, len(s)), make([]float64, len(s))
					for n := range s {
						ratios[n] = s[n] / samples[0][p][n]
						overCgo[n] = s[n] - samples[1][p][n]
					}
					fmt.Printf("ab %s/%dMiB %s %s mean %.0f median %.0f ratio-of-means %.4f median-paired-ratio %.4f n %d over-cgo-paired %.0f\n",
						c.mode, c.size>>20, phase, name, mean(s), median(s), mean(s)/mean(samples[0][p]), median(ratios), len(s), median(overCgo))
				}
			}
		})
	}
}

// ops is what goRun needs of a binding.
// Addresses are plain uint64, as the cgo bindings take them; vmmOps converts.
type ops[H any] interface {
	Reserve(size uint64) (uint64, error)
	Free(va, size uint64) error
	Create(size uint64) (H, error)
	Release(h H) error
	Map(va, size uint64, h H) error
	Unmap(va, size uint64) error
	SetAccess(va, size uint64) error
}

var base = time.Now()

// mono is one monotonic clock read (time.Since calls the runtime's nanotime, one vDSO
// clock_gettime(CLOCK_MONOTONIC), as C's ab_now does).
func mono() time.Duration { return time.Since(base) }

// goRun is ab_cycle (k == 1) or ab_batch in Go over o, timed in Go.
func goRun[H any](o ops[H], size uint64, k int) (t [5]int64, err error) {
	va, err := o.Reserve(size * uint64(k))
	if err != nil {
		return t, err
	}
	at := func(i int) uint64 { return va + uint64(i)*size }
	var hs [512]H
	ct, cTimed := o.(interface{ Last() int64 })
	var in [5]int64 // the C-timed sums, when o times its calls in C
	last := func(p int) {
		if cTimed {
			in[p] += ct.Last()
		}
	}
	a0 := mono()
	for i := range k {
		if hs[i], err = o.Create(size); err != nil {
			return t, err
		}
		last(0)
	}
	a1 := mono()
	for i := range k {
		if err = o.Map(at(i), size, hs[i]); err != nil {
			return t, err
		}
		last(1)
	}
	a2 := mono()
	for i := range k {
		if err = o.SetAccess(at(i), size); err != nil {
			return t, err
		}
		last(2)
	}
	a3 := mono()
	for i := range k {
		if err = o.Unmap(at(i), size); err != nil {
			return t, err
		}
		last(3)
	}
	a4 := mono()
	for i := range k {
		if err = o.Release(hs[i]); err != nil {
			return t, err
		}
		last(4)
	}
	a5 := mono()
	if err = o.Free(va, size*uint64(k)); err != nil {
		return t, err
	}
	if cTimed {
		return in, nil
	}
	return [5]int64{int64(a1 - a0), int64(a2 - a1), int64(a3 - a2), int64(a4 - a3), int64(a5 - a4)}, nil
}

var (
	abProp = &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}}
	abDesc = vmm.ReadWrite(0)
)

type vmmOps struct{ be vmm.Backend }

func (o vmmOps) Reserve(size uint64) (uint64, error) {
	va, err := o.be.Reserve(size, 0, 0, 0)
	return uint64(va), err
}
func (o vmmOps) Free(va, size uint64) error               { return o.be.Free(cu.DevicePtr(va), size) }
func (o vmmOps) Create(size uint64) (cu.MemHandle, error) { return o.be.Create(size, abProp, 0) }
func (o vmmOps) Release(h cu.MemHandle) error             { return o.be.Release(h) }
func (o vmmOps) Map(va, size uint64, h cu.MemHandle) error {
	return o.be.Map(cu.DevicePtr(va), size, 0, h, 0)
}
func (o vmmOps) Unmap(va, size uint64) error { return o.be.Unmap(cu.DevicePtr(va), size) }
func (o vmmOps) SetAccess(va, size uint64) error {
	return o.be.SetAccess(cu.DevicePtr(va), size, abDesc)
}

func mean(s []float64) float64 {
	var sum float64
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s))
}

func median(s []float64) float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}
