//go:build gpu

package cu

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// BenchmarkGPUConcLayers splits the concurrency benchmark's gap (bench/cgo
// BenchmarkConcurrency, own handles) between cu's call path and its bookkeeping: N
// goroutines each create, map, set access to, unmap and release 16 chunks of 2 MiB of their
// own, 20 rounds, once through the generated calls alone (raw: a frame and the trampoline,
// what a plain binding does; frameMemCreate for the create) and once through the exported
// functions (cu: the handle table and the mapping records as well), interleaved repetition by
// repetition; it fails if handles or mappings are left behind. It prints
//
//	conclayers <workers> <way> median-ops/s <x> median-ratio <x> n <k>
//
// with the ratio over raw of the same repetition.
func BenchmarkGPUConcLayers(b *testing.B) {
	requireDriver(b)
	// CONCLAYERS_PRIMARY=1 retains device 0's primary context first: with a context active in
	// the process the driver's VMM calls behave differently (see docs/benchmarks.md).
	if os.Getenv("CONCLAYERS_PRIMARY") == "1" {
		if _, err := Device(0).Primary(); err != nil {
			b.Fatal(err)
		}
	}
	const size, chunks, rounds, reps = 2 << 20, 16, 20, 9
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE}}
	desc := []MemAccessDesc{{Location: prop.Location, Flags: MEM_ACCESS_FLAGS_PROT_READWRITE}}
	type ops struct {
		create  func() (uint64, error)
		mapH    func(va DevicePtr, h uint64) error
		access  func(va DevicePtr) error
		unmap   func(va DevicePtr) error
		release func(h uint64) error
	}
	raw := ops{
		create:  func() (uint64, error) { return frameMemCreate(size, prop) },
		mapH:    func(va DevicePtr, h uint64) error { return cuMemMap(va, size, 0, h, 0) },
		access:  func(va DevicePtr) error { return cuMemSetAccess(va, size, desc) },
		unmap:   func(va DevicePtr) error { return cuMemUnmap(va, size) },
		release: func(h uint64) error { return cuMemRelease(h) },
	}
	exported := ops{
		create:  func() (uint64, error) { h, err := MemCreate(size, prop, 0); return uint64(h), err },
		mapH:    func(va DevicePtr, h uint64) error { return MemMap(va, size, 0, MemHandle(h), 0) },
		access:  func(va DevicePtr) error { return MemSetAccess(va, size, desc) },
		unmap:   func(va DevicePtr) error { return MemUnmap(va, size) },
		release: func(h uint64) error { return MemRelease(MemHandle(h)) },
	}
	work := func(o ops, va DevicePtr) (_ int64, err error) {
		var hs [chunks]uint64
		var held, mapped [chunks]bool
		at := func(c int) DevicePtr { return va + DevicePtr(c*size) }
		// A failed round leaves chunks mapped and handles held: undo them, so that the
		// failure is reported without leaking device memory.
		defer func() {
			for c := range chunks {
				if mapped[c] {
					_ = o.unmap(at(c))
				}
				if held[c] {
					_ = o.release(hs[c])
				}
			}
		}()
		for range rounds {
			for c := range chunks {
				if hs[c], err = o.create(); err != nil {
					return 0, err
				}
				held[c] = true
			}
			for c := range chunks {
				if err = o.mapH(at(c), hs[c]); err != nil {
					return 0, err
				}
				mapped[c] = true
			}
			for c := range chunks {
				if err = o.access(at(c)); err != nil {
					return 0, err
				}
			}
			for c := range chunks {
				if err = o.unmap(at(c)); err != nil {
					return 0, err
				}
				mapped[c] = false
			}
			for c := range chunks {
				if err = o.release(hs[c]); err != nil {
					return 0, err
				}
				held[c] = false
			}
		}
		return 5 * chunks * rounds, nil
	}
	run := func(o ops, n int) (float64, error) {
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, n)
		counts := make([]int64, n)
		for i := range n {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				va, err := cuMemAddressReserve(size*chunks, 0, 0, 0)
				ready.Done()
				<-start
				if err != nil {
					errs[i] = err
					return
				}
				counts[i], errs[i] = work(o, va)
				_ = cuMemAddressFree(va, size*chunks)
			}()
		}
		ready.Wait()
		t0 := time.Now()
		close(start)
		done.Wait()
		d := time.Since(t0)
		var total int64
		for i, err := range errs {
			if err != nil {
				return 0, err
			}
			total += counts[i]
		}
		return float64(total) / d.Seconds(), nil
	}
	liveBefore, _ := LiveHandles()
	mapsBefore := handles.recorded()
	ways := []ops{raw, exported}
	names := []string{"raw", "cu"}
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				rate := make([][]float64, len(ways))
				for r := range reps {
					for j := range ways {
						k := (r + j) % len(ways)
						x, err := run(ways[k], n)
						if err != nil {
							b.Fatalf("%s: %v", names[k], err)
						}
						rate[k] = append(rate[k], x)
					}
				}
				for k := range ways {
					ratios := make([]float64, reps)
					for i := range ratios {
						ratios[i] = rate[k][i] / rate[0][i]
					}
					fmt.Printf("conclayers %d %s median-ops/s %.0f median-ratio %.4f n %d\n", n, names[k], medianOf(rate[k]), medianOf(ratios), reps)
				}
			}
			if live, _ := LiveHandles(); live != liveBefore {
				b.Fatalf("%d handles live after the runs, %d before", live, liveBefore)
			}
			if m := handles.recorded(); m != mapsBefore {
				b.Fatalf("%d mappings recorded after the runs, %d before", m, mapsBefore)
			}
		})
	}
}
