package sim_test

import (
	"strconv"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
)

// cycle is one create, reserve, map, set access, unmap, free, release of 2 MiB.
func cycle(b *testing.B, s *sim.Sim, prop *cu.MemAllocationProp, desc []cu.MemAccessDesc) {
	h, err := s.Create(2*mib, prop, 0)
	if err != nil {
		b.Fatal(err)
	}
	va, err := s.Reserve(2*mib, 0, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Map(va, 2*mib, 0, h, 0); err != nil {
		b.Fatal(err)
	}
	if err := s.SetAccess(va, 2*mib, desc); err != nil {
		b.Fatal(err)
	}
	if err := s.Unmap(va, 2*mib); err != nil {
		b.Fatal(err)
	}
	if err := s.Free(va, 2*mib); err != nil {
		b.Fatal(err)
	}
	if err := s.Release(h); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCycle2MiB is the yardstick: about 60 µs on a real H200, at most 3 µs
// wanted on sim.
func BenchmarkCycle2MiB(b *testing.B) {
	s, err := sim.New(sim.PresetH200())
	if err != nil {
		b.Fatal(err)
	}
	prop, desc := devProp(0, 0), rwDesc(0)
	b.ReportAllocs()
	for b.Loop() {
		cycle(b, s, prop, desc)
	}
}

// BenchmarkCycleWithLiveMappings runs the same cycle with n other reservations, each holding
// a live mapping: the per-operation cost must not grow with n (the trees are O(log n)).
func BenchmarkCycleWithLiveMappings(b *testing.B) {
	for _, n := range []int{10, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, err := sim.New(sim.PresetH200())
			if err != nil {
				b.Fatal(err)
			}
			prop, desc := devProp(0, 0), rwDesc(0)
			h, err := s.Create(2*mib, prop, 0)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				va, err := s.Reserve(2*mib, 0, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Map(va, 2*mib, 0, h, 0); err != nil {
					b.Fatal(err)
				}
				// Interleave reservations without mappings, so the trees hold both kinds.
				if i%2 == 0 {
					gap, _ := s.Reserve(2*mib, 0, 0, 0)
					defer s.Free(gap, 2*mib)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				cycle(b, s, prop, desc)
			}
		})
	}
}
