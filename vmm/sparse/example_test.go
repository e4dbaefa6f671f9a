package sparse_test

import (
	"fmt"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sparse"
)

// A 1 TiB array costs device memory only for the pages written.
func Example() {
	s, err := sim.New(sim.PresetH100())
	if err != nil {
		panic(err)
	}
	a, err := sparse.New(vmm.New(s), 1<<40, sparse.Options{})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	for _, off := range []int64{0, 300 << 30, 700<<30 + 5} {
		if _, err := a.WriteAt([]byte("page"), off); err != nil {
			panic(err)
		}
	}
	st := a.Stats()
	fmt.Printf("%d of %d pages committed (%d MiB), occupancy %.6f%%\n", st.Committed, st.Pages, st.CommittedSize>>20, 100*st.Occupancy)
	if err := a.Decommit(300<<30, 2<<20); err != nil {
		panic(err)
	}
	fmt.Println("after decommit:", a.Stats().Committed, "pages,", len(a.CommittedRanges()), "ranges")
	// Output:
	// 3 of 524288 pages committed (6 MiB), occupancy 0.000572%
	// after decommit: 2 pages, 2 ranges
}
