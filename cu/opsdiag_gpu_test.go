//go:build gpu

package cu

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// BenchmarkGPUOpsLayers times the VMM operation cycle of bench/c/callcost.c at two layers
// of cu, with one monotonic clock read per boundary (time.Since of a base: one vDSO call,
// as C's clock_gettime):
//
//   - raw: syscall6 on the entry points straight, no handle table, no error wrapping;
//     "raw-dlsym" does the same with the addresses dlsym gives for the exported names
//     (what a C program linked with -lcuda calls) instead of cuGetProcAddress_v2's.
//   - cu: the package's exported functions (MemCreate, MemMap, ...).
//
// Together with vmm's BenchmarkGPUOps and bench/cgo's BenchmarkCgoOps it places the
// difference between cuvmm and C.
func BenchmarkGPUOpsLayers(b *testing.B) {
	requireDriver(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE}}
	desc := []MemAccessDesc{{Location: prop.Location, Flags: MEM_ACCESS_FLAGS_PROT_READWRITE}}

	type fns struct{ reserve, free, create, release, mmap, unmap, access uintptr }
	addr := func(p interface{ Addr() (uintptr, error) }) uintptr {
		a, err := p.Addr()
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	pa := fns{addr(procMemAddressReserve), addr(procMemAddressFree), addr(procMemCreate), addr(procMemRelease),
		addr(procMemMap), addr(procMemUnmap), addr(procMemSetAccess)}
	h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		b.Fatal(err)
	}
	sym := func(n string) uintptr {
		a, err := purego.Dlsym(h, n)
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	dl := fns{sym("cuMemAddressReserve"), sym("cuMemAddressFree"), sym("cuMemCreate"), sym("cuMemRelease"),
		sym("cuMemMap"), sym("cuMemUnmap"), sym("cuMemSetAccess")}
	for _, a := range []struct {
		name string
		f    fns
	}{{"getprocaddress", pa}, {"dlsym", dl}} {
		fmt.Fprintf(os.Stderr, "diag: %s create=%#x map=%#x access=%#x\n", a.name, a.f.create, a.f.mmap, a.f.access)
	}

	// Heap scratch (the memory rule of syscall.go).
	sc := new(struct {
		va, h uint64
		prop  MemAllocationProp
		desc  [1]MemAccessDesc
	})
	sc.prop, sc.desc[0] = *prop, desc[0]
	ck := func(op string, r uintptr) {
		if uint32(r) != 0 {
			b.Fatalf("%s: %v", op, Result(int32(uint32(r))))
		}
	}
	base := time.Now()
	mono := func() time.Duration { return time.Since(base) }
	rawCycle := func(f fns, size uint64, t *[5]time.Duration) {
		ck("reserve", syscall6(f.reserve, uintptr(unsafe.Pointer(&sc.va)), uintptr(size), 0, 0, 0, 0))
		t0 := mono()
		ck("create", syscall6(f.create, uintptr(unsafe.Pointer(&sc.h)), uintptr(size), uintptr(unsafe.Pointer(&sc.prop)), 0, 0, 0))
		t1 := mono()
		ck("map", syscall6(f.mmap, uintptr(sc.va), uintptr(size), 0, uintptr(sc.h), 0, 0))
		t2 := mono()
		ck("access", syscall6(f.access, uintptr(sc.va), uintptr(size), uintptr(unsafe.Pointer(&sc.desc[0])), 1, 0, 0))
		t3 := mono()
		ck("unmap", syscall6(f.unmap, uintptr(sc.va), uintptr(size), 0, 0, 0, 0))
		t4 := mono()
		ck("release", syscall6(f.release, uintptr(sc.h), 0, 0, 0, 0, 0))
		t5 := mono()
		ck("free", syscall6(f.free, uintptr(sc.va), uintptr(size), 0, 0, 0, 0))
		t[0] += t1 - t0
		t[1] += t2 - t1
		t[2] += t3 - t2
		t[3] += t4 - t3
		t[4] += t5 - t4
	}
	cuCycle := func(size uint64, t *[5]time.Duration) {
		va, err := MemAddressReserve(size, 0, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		t0 := mono()
		h, err := MemCreate(size, prop, 0)
		t1 := mono()
		if err != nil {
			b.Fatal(err)
		}
		if err := MemMap(va, size, 0, h, 0); err != nil {
			b.Fatal(err)
		}
		t2 := mono()
		if err := MemSetAccess(va, size, desc); err != nil {
			b.Fatal(err)
		}
		t3 := mono()
		if err := MemUnmap(va, size); err != nil {
			b.Fatal(err)
		}
		t4 := mono()
		if err := MemRelease(h); err != nil {
			b.Fatal(err)
		}
		t5 := mono()
		if err := MemAddressFree(va, size); err != nil {
			b.Fatal(err)
		}
		t[0] += t1 - t0
		t[1] += t2 - t1
		t[2] += t3 - t2
		t[3] += t4 - t3
		t[4] += t5 - t4
	}
	// Variants of the three short calls, each adding one piece of cu's bookkeeping to raw.
	type impl struct {
		name    string
		create  func(size uint64) uint64
		mmap    func(va, size, h uint64)
		release func(h uint64)
	}
	rawCreate := func(size uint64) uint64 {
		ck("create", syscall6(pa.create, uintptr(unsafe.Pointer(&sc.h)), uintptr(size), uintptr(unsafe.Pointer(&sc.prop)), 0, 0, 0))
		return sc.h
	}
	rawMap := func(va, size, h uint64) {
		ck("map", syscall6(pa.mmap, uintptr(va), uintptr(size), 0, uintptr(h), 0, 0))
	}
	rawRelease := func(h uint64) { ck("release", syscall6(pa.release, uintptr(h), 0, 0, 0, 0, 0)) }
	impls := []impl{
		{"raw", rawCreate, rawMap, rawRelease},
		{"proc", func(size uint64) uint64 {
			a, _ := procMemCreate.Addr()
			ck("create", syscall6(a, uintptr(unsafe.Pointer(&sc.h)), uintptr(size), uintptr(unsafe.Pointer(&sc.prop)), 0, 0, 0))
			return sc.h
		}, func(va, size, h uint64) {
			a, _ := procMemMap.Addr()
			ck("map", syscall6(a, uintptr(va), uintptr(size), 0, uintptr(h), 0, 0))
		}, func(h uint64) {
			a, _ := procMemRelease.Addr()
			ck("release", syscall6(a, uintptr(h), 0, 0, 0, 0, 0))
		}},
		{"rlock", rawCreate, func(va, size, h uint64) {
			handles.mu.RLock()
			rawMap(va, size, h)
			handles.mu.RUnlock()
		}, rawRelease},
		{"table", func(size uint64) uint64 {
			h := rawCreate(size)
			handles.add(MemHandle(h), kindMemory)
			return h
		}, func(va, size, h uint64) {
			if err := handles.acquire(MemHandle(h)); err != nil {
				b.Fatal(err)
			}
			rawMap(va, size, h)
			handles.done()
		}, func(h uint64) {
			if err := handles.release(MemHandle(h), func() error { rawRelease(h); return nil }); err != nil {
				b.Fatal(err)
			}
		}},
		{"frame", func(size uint64) uint64 {
			var f frame
			*f.prop(1) = *prop
			f.ref(0, 0)
			f.ref(2, 1)
			f.a[1] = uintptr(size)
			if err := f.call(procMemCreate); err != nil {
				b.Fatal(err)
			}
			return f.scratch[0]
		}, func(va, size, h uint64) {
			if err := call(procMemMap, uintptr(va), uintptr(size), 0, uintptr(h), 0); err != nil {
				b.Fatal(err)
			}
		}, rawRelease},
		{"cu", func(size uint64) uint64 {
			h, err := MemCreate(size, prop, 0)
			if err != nil {
				b.Fatal(err)
			}
			return uint64(h)
		}, func(va, size, h uint64) {
			if err := MemMap(DevicePtr(va), size, 0, MemHandle(h), 0); err != nil {
				b.Fatal(err)
			}
		}, func(h uint64) {
			if err := MemRelease(MemHandle(h)); err != nil {
				b.Fatal(err)
			}
		}},
	}
	cycle := func(im impl, size uint64, t *[5]time.Duration) {
		ck("reserve", syscall6(pa.reserve, uintptr(unsafe.Pointer(&sc.va)), uintptr(size), 0, 0, 0, 0))
		va := sc.va
		t0 := mono()
		h := im.create(size)
		t1 := mono()
		im.mmap(va, size, h)
		t2 := mono()
		ck("access", syscall6(pa.access, uintptr(va), uintptr(size), uintptr(unsafe.Pointer(&sc.desc[0])), 1, 0, 0))
		t3 := mono()
		ck("unmap", syscall6(pa.unmap, uintptr(va), uintptr(size), 0, 0, 0, 0))
		t4 := mono()
		im.release(h)
		t5 := mono()
		ck("free", syscall6(pa.free, uintptr(va), uintptr(size), 0, 0, 0, 0))
		t[0] += t1 - t0
		t[1] += t2 - t1
		t[4] += t5 - t4
		_ = t3
	}
	_ = rawCycle
	_ = cuCycle
	for _, size := range []uint64{2 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			samples := make([][5][]float64, len(impls))
			i := 0
			for b.Loop() {
				for j := range impls {
					w := (i + j) % len(impls)
					var t [5]time.Duration
					cycle(impls[w], size, &t)
					for p := range t {
						samples[w][p] = append(samples[w][p], float64(t[p]))
					}
				}
				i++
			}
			for p, phase := range []string{"create", "map", "setaccess", "unmap", "release"} {
				if p == 2 || p == 3 {
					continue
				}
				for w, im := range impls {
					s := samples[w][p]
					r := make([]float64, len(s))
					for n := range s {
						r[n] = s[n] / samples[0][p][n]
					}
					fmt.Printf("layers %dMiB %s %s median %.0f median-paired-ratio %.4f\n", size>>20, phase, im.name, diagMedian(s), diagMedian(r))
				}
			}
		})
	}
	_ = dl
}

func diagMedian(s []float64) float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// BenchmarkClock is the cost of the clock reads the operation benchmarks make.
func BenchmarkClock(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	base := time.Now()
	b.Run("time.Since", func(b *testing.B) {
		for b.Loop() {
			_ = time.Since(base)
		}
	})
}
