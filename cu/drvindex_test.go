package cu

import (
	"math/rand/v2"
	"testing"
)

// TestDrvIndexAgainstMap runs random puts, removes and finds on a drvIndex and a Go map side
// by side, with driver values drawn from a small set (so that probe runs collide, wrap and
// get holes) and from address-like values.
func TestDrvIndexAgainstMap(t *testing.T) {
	for _, spread := range []uint64{7, 12, 40, 1 << 40} {
		r := rand.New(rand.NewPCG(1, spread))
		var x drvIndex
		ref := map[uint64]uint32{}
		for step := range 200000 {
			drv := r.Uint64N(spread)<<12 | 0x7f0000000000
			switch r.IntN(3) {
			case 0:
				idx := r.Uint32N(1 << 20)
				x.put(drv, idx)
				ref[drv] = idx
			case 1:
				idx, ok := ref[drv]
				if !ok || r.IntN(4) == 0 {
					idx = r.Uint32N(1 << 20) // usually not the one drv maps to: no removal
				}
				x.remove(drv, idx)
				if ref[drv] == idx {
					delete(ref, drv)
				}
			}
			got, ok := x.find(drv)
			want, wok := ref[drv]
			if ok != wok || got != want {
				t.Fatalf("step %d: find(%#x) = %d, %v; want %d, %v", step, drv, got, ok, want, wok)
			}
			if x.n != len(ref) {
				t.Fatalf("step %d: %d entries, want %d", step, x.n, len(ref))
			}
		}
		for drv, want := range ref {
			if got, ok := x.find(drv); !ok || got != want {
				t.Fatalf("find(%#x) = %d, %v at the end; want %d", drv, got, ok, want)
			}
		}
	}
}

func TestDrvIndexZeroValue(t *testing.T) {
	var x drvIndex
	if _, ok := x.find(1); ok {
		t.Fatal("the zero drvIndex found a value")
	}
	x.remove(1, 0) // nothing to remove: no panic
	x.put(0, 7)    // 0 is a value like any other
	if idx, ok := x.find(0); !ok || idx != 7 {
		t.Fatalf("find(0) = %d, %v", idx, ok)
	}
}

// TestDrvIndexWrappedRun removes from a probe run that wraps from the end of the table to its
// start, where an entry whose home is at the end must move back across the wrap.
func TestDrvIndexWrappedRun(t *testing.T) {
	x := drvIndex{tab: make([]drvEntry, drvIndexMinLen)}
	last := drvIndexMinLen - 1
	withHome := func(home int, skip uint64) uint64 {
		for drv := skip + 1; ; drv++ {
			if x.home(drv) == home {
				return drv
			}
		}
	}
	a := withHome(last, 0)
	b := withHome(0, 0)
	c := withHome(last, a)
	x.put(a, 1) // at the end
	x.put(b, 2) // at 0
	x.put(c, 3) // home at the end, placed at 1
	x.remove(b, 2)
	for drv, want := range map[uint64]uint32{a: 1, c: 3} {
		if got, ok := x.find(drv); !ok || got != want {
			t.Fatalf("after removing the entry at 0: find(%#x) = %d, %v; want %d", drv, got, ok, want)
		}
	}
	x.remove(a, 1)
	if got, ok := x.find(c); !ok || got != 3 {
		t.Fatalf("after removing the entry at the end: find(%#x) = %d, %v; want 3", c, got, ok)
	}
	if _, ok := x.find(b); ok {
		t.Fatal("a removed value is still found")
	}
}
