package sparse_test

import (
	"math/rand/v2"
	"testing"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sparse"
)

// BenchmarkRandomCommit commits and decommits single pages in random order in an array
// half full of 60,000 pages (120 GiB of a simulated H200): what the array's and its
// region's bookkeeping cost per page once they hold tens of thousands (the simulator's
// calls are a microsecond or so; the driver's tens).
func BenchmarkRandomCommit(b *testing.B) {
	s, err := sim.New(sim.PresetH200())
	if err != nil {
		b.Fatal(err)
	}
	m := vmm.New(s)
	const pages = 60000
	a, err := sparse.New(m, pages*2<<20, sparse.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { b.StopTimer(); a.Close() }()
	perm := rand.New(rand.NewPCG(1, 2)).Perm(pages)
	for _, i := range perm[:pages/2] {
		if err := a.Commit(uint64(i)*2<<20, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	k := pages / 2
	for range b.N {
		i := perm[k%pages]
		if k%pages < pages/2 {
			_ = a.Decommit(uint64(i)*2<<20, 2<<20)
		} else {
			_ = a.Commit(uint64(i)*2<<20, 1)
		}
		k++
	}
}
