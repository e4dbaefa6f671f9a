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
// (create, map, unmap, release): each variant adds pieces to a bare syscall6 on the resolved
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
// Variants:
//   - raw: syscall6 with heap scratch;
//   - frame: the generated calls (a frame and call), without the handle table: the cost of
//     a plain binding;
//   - pin: the exported create and release, and a map that pins its handle as MemMap does
//     but records no mapping (and an unmap that looks for none);
//   - cu: the exported functions.
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
	rawUnmap := func(va, size uint64) { ck("unmap", syscall6(unmapFn, uintptr(va), uintptr(size), 0, 0, 0, 0)) }
	rawRelease := func(h uint64) { ck("release", syscall6(releaseFn, uintptr(h), 0, 0, 0, 0, 0)) }
	frameCreate := func(size uint64) uint64 {
		h, err := frameMemCreate(size, prop)
		must(err)
		return h
	}
	frameMap := func(va, size, h uint64) { must(cuMemMap(DevicePtr(va), size, 0, h, 0)) }
	frameUnmap := func(va, size uint64) { must(cuMemUnmap(DevicePtr(va), size)) }
	cuCreate := func(size uint64) uint64 {
		h, err := MemCreate(size, prop, 0)
		must(err)
		return uint64(h)
	}
	cuUnmap := func(va, size uint64) { must(MemUnmap(DevicePtr(va), size)) }
	cuRelease := func(h uint64) { must(MemRelease(MemHandle(h))) }
	type variant struct {
		name    string
		create  func(size uint64) uint64
		mmap    func(va, size, h uint64)
		unmap   func(va, size uint64)
		release func(h uint64)
	}
	variants := []variant{
		{"raw", rawCreate, rawMap, rawUnmap, rawRelease},
		{"frame", frameCreate, frameMap, frameUnmap, func(h uint64) { must(cuMemRelease(h)) }},
		{"pin", cuCreate, func(va, size, h uint64) {
			s, drv, err := handles.pin(MemHandle(h))
			must(err)
			must(cuMemMap(DevicePtr(va), size, 0, drv, 0))
			s.unpin()
		}, frameUnmap, cuRelease},
		{"cu", cuCreate, func(va, size, h uint64) {
			must(MemMap(DevicePtr(va), size, 0, MemHandle(h), 0))
		}, cuUnmap, cuRelease},
	}
	ops := []string{"create", "map", "unmap", "release"}
	base := time.Now()
	mono := func() time.Duration { return time.Since(base) }
	// cycle runs one reserve, create, map, set access, unmap, release, free cycle and
	// returns the ns of create, map, unmap and release.
	cycle := func(v variant, size uint64) [4]float64 {
		ck("reserve", syscall6(reserveFn, uintptr(unsafe.Pointer(&sc.va)), uintptr(size), 0, 0, 0, 0))
		va := sc.va
		t0 := mono()
		h := v.create(size)
		t1 := mono()
		v.mmap(va, size, h)
		t2 := mono()
		ck("access", syscall6(accessFn, uintptr(va), uintptr(size), uintptr(unsafe.Pointer(&sc.desc)), 1, 0, 0))
		t3 := mono()
		v.unmap(va, size)
		t4 := mono()
		v.release(h)
		t5 := mono()
		ck("free", syscall6(freeFn, uintptr(va), uintptr(size), 0, 0, 0, 0))
		return [4]float64{float64(t1 - t0), float64(t2 - t1), float64(t4 - t3), float64(t5 - t4)}
	}
	liveBefore, _ := LiveHandles()
	mapsBefore := handles.recorded()
	for _, size := range []uint64{2 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			samples := make([][4][]float64, len(variants))
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
			for p, op := range ops {
				for w, v := range variants {
					s := samples[w][p]
					r := make([]float64, len(s))
					for n := range s {
						r[n] = s[n] / samples[0][p][n]
					}
					fmt.Printf("layers %dMiB %s %s median %.0f median-paired-ratio %.4f\n", size>>20, op, v.name, medianOf(s), medianOf(r))
				}
			}
			if n, _ := LiveHandles(); n != liveBefore {
				b.Fatalf("%d handles live after the cycles, %d before", n, liveBefore)
			}
			if n := handles.recorded(); n != mapsBefore {
				b.Fatalf("%d mappings recorded after the cycles, %d before", n, mapsBefore)
			}
		})
	}
}

// frameMemCreate is the generated cuMemCreate without the handle table: it returns the
// driver's value, which only the generated calls (cuMemMap, cuMemRelease) may be given.
func frameMemCreate(size uint64, prop *MemAllocationProp) (uint64, error) {
	var f frame
	*(*MemAllocationProp)(unsafe.Pointer(&f.scratch[1])) = *prop
	f.ref(0, 0)
	f.ref(2, 1)
	f.a[1] = uintptr(size)
	if err := f.call(procMemCreate); err != nil {
		return 0, err
	}
	return f.scratch[0], nil
}

func medianOf(s []float64) float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	return c[len(c)/2]
}
