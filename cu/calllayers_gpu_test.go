//go:build gpu

package cu

import (
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkGPUCallLayers attributes the cost of cu's bookkeeping around the short VMM calls
// (create, map, release): each variant adds one piece to a bare syscall6 on the resolved
// entry point, and they run interleaved, iteration by iteration, in bench/c/callcost.c's
// cycle, so that the driver's drift falls on all alike. Right after a driver call the
// caller's code and data are cold in the caches, so each extra function or cache line costs
// far more than it does in a tight loop; this is where that shows.
//
// It prints, per size, operation and variant, the median ns and the median of the
// per-iteration ratios over raw:
//
//	layers <size> <op> <variant> median <ns> median-paired-ratio <x>
//
// Variants: raw (syscall6, heap scratch); proc (+ Proc.Addr); table (+ the handle table:
// add, pin and unpin, release); frame (a frame instead of heap scratch, and call instead of
// syscall6, with the driver's values); cu (the exported functions).
func BenchmarkGPUCallLayers(b *testing.B) {
	requireDriver(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE}}
	addr := func(p interface{ Addr() (uintptr, error) }) uintptr {
		a, err := p.Addr()
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	reserveFn, freeFn, accessFn, unmapFn := addr(procMemAddressReserve), addr(procMemAddressFree), addr(procMemSetAccess), addr(procMemUnmap)
	createFn, mapFn, releaseFn := addr(procMemCreate), addr(procMemMap), addr(procMemRelease)

	// Heap scratch (the memory rule of syscall.go), for the variants without a frame.
	sc := new(struct {
		va, h uint64
		prop  MemAllocationProp
		desc  MemAccessDesc
	})
	sc.prop = *prop
	sc.desc = MemAccessDesc{Location: prop.Location, Flags: MEM_ACCESS_FLAGS_PROT_READWRITE}
	ck := func(op string, r uintptr) {
		if uint32(r) != 0 {
			b.Fatalf("%s: %v", op, Result(int32(uint32(r))))
		}
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	rawCreate := func(size uint64) uint64 {
		ck("create", syscall6(createFn, uintptr(unsafe.Pointer(&sc.h)), uintptr(size), uintptr(unsafe.Pointer(&sc.prop)), 0, 0, 0))
		return sc.h
	}
	rawMap := func(va, size, h uint64) { ck("map", syscall6(mapFn, uintptr(va), uintptr(size), 0, uintptr(h), 0, 0)) }
	rawRelease := func(h uint64) { ck("release", syscall6(releaseFn, uintptr(h), 0, 0, 0, 0, 0)) }
	type variant struct {
		name    string
		create  func(size uint64) uint64
		mmap    func(va, size, h uint64)
		release func(h uint64)
	}
	variants := []variant{
		{"raw", rawCreate, rawMap, rawRelease},
		{"proc", func(size uint64) uint64 {
			ck("create", syscall6(addr(procMemCreate), uintptr(unsafe.Pointer(&sc.h)), uintptr(size), uintptr(unsafe.Pointer(&sc.prop)), 0, 0, 0))
			return sc.h
		}, func(va, size, h uint64) {
			ck("map", syscall6(addr(procMemMap), uintptr(va), uintptr(size), 0, uintptr(h), 0, 0))
		}, func(h uint64) {
			ck("release", syscall6(addr(procMemRelease), uintptr(h), 0, 0, 0, 0, 0))
		}},
		{"table", func(size uint64) uint64 {
			h, err := handles.add(rawCreate(size))
			must(err)
			return uint64(h)
		}, func(va, size, h uint64) {
			s, drv, err := handles.pin(MemHandle(h))
			must(err)
			rawMap(va, size, drv)
			s.unpin()
		}, func(h uint64) {
			must(handles.release(MemHandle(h), func(drv uint64) error { rawRelease(drv); return nil }))
		}},
		{"frame", func(size uint64) uint64 {
			var f frame
			*(*MemAllocationProp)(unsafe.Pointer(&f.scratch[1])) = *prop
			f.ref(0, 0)
			f.ref(2, 1)
			f.a[1] = uintptr(size)
			must(f.call(procMemCreate))
			return f.scratch[0]
		}, func(va, size, h uint64) {
			must(call(procMemMap, uintptr(va), uintptr(size), 0, uintptr(h), 0))
		}, func(h uint64) {
			must(call(procMemRelease, uintptr(h)))
		}},
		{"cu", func(size uint64) uint64 {
			h, err := MemCreate(size, prop, 0)
			must(err)
			return uint64(h)
		}, func(va, size, h uint64) {
			must(MemMap(DevicePtr(va), size, 0, MemHandle(h), 0))
		}, func(h uint64) {
			must(MemRelease(MemHandle(h)))
		}},
	}
	base := time.Now()
	mono := func() time.Duration { return time.Since(base) }
	// cycle runs one reserve, create, map, set access, unmap, release, free cycle and
	// returns the ns of create, map and release.
	cycle := func(v variant, size uint64) [3]float64 {
		ck("reserve", syscall6(reserveFn, uintptr(unsafe.Pointer(&sc.va)), uintptr(size), 0, 0, 0, 0))
		va := sc.va
		t0 := mono()
		h := v.create(size)
		t1 := mono()
		v.mmap(va, size, h)
		t2 := mono()
		ck("access", syscall6(accessFn, uintptr(va), uintptr(size), uintptr(unsafe.Pointer(&sc.desc)), 1, 0, 0))
		ck("unmap", syscall6(unmapFn, uintptr(va), uintptr(size), 0, 0, 0, 0))
		t3 := mono()
		v.release(h)
		t4 := mono()
		ck("free", syscall6(freeFn, uintptr(va), uintptr(size), 0, 0, 0, 0))
		return [3]float64{float64(t1 - t0), float64(t2 - t1), float64(t4 - t3)}
	}
	for _, size := range []uint64{2 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			samples := make([][3][]float64, len(variants))
			i := 0
			for b.Loop() {
				for j := range variants {
					w := (i + j) % len(variants)
					t := cycle(variants[w], size)
					for p := range t {
						samples[w][p] = append(samples[w][p], t[p])
					}
				}
				i++
			}
			for p, op := range []string{"create", "map", "release"} {
				for w, v := range variants {
					s := samples[w][p]
					r := make([]float64, len(s))
					for n := range s {
						r[n] = s[n] / samples[0][p][n]
					}
					fmt.Printf("layers %dMiB %s %s median %.0f median-paired-ratio %.4f\n", size>>20, op, v.name, medianOf(s), medianOf(r))
				}
			}
		})
	}
}

func medianOf(s []float64) float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	return c[len(c)/2]
}
