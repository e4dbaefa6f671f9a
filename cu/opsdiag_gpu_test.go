//go:build gpu

package cu

import (
	"fmt"
	"os"
	"runtime"
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
	for _, size := range []uint64{2 << 20, 64 << 20, 1 << 30} {
		for _, layer := range []string{"raw", "raw-dlsym", "cu"} {
			b.Run(fmt.Sprintf("%s/%dMiB", layer, size>>20), func(b *testing.B) {
				var t [5]time.Duration
				for b.Loop() {
					switch layer {
					case "raw":
						rawCycle(pa, size, &t)
					case "raw-dlsym":
						rawCycle(dl, size, &t)
					default:
						cuCycle(size, &t)
					}
				}
				n := float64(b.N)
				for i, m := range []string{"ns/create", "ns/map", "ns/setaccess", "ns/unmap", "ns/release"} {
					b.ReportMetric(float64(t[i].Nanoseconds())/n, m)
				}
			})
		}
	}
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
