package sim

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBudgetFillsExactly commits 2 MiB at a time: the creates that succeed fill the
// capacity exactly, whatever the stripes took spare, and releasing them all leaves nothing
// committed.
func TestBudgetFillsExactly(t *testing.T) {
	for _, limit := range []uint64{4 * mib, 100 * mib, 3*budgetChunk + 6*mib} {
		var b budget
		b.limit.Store(limit)
		n := uint64(0)
		for b.commit(2 * mib) {
			n++
			require.Equal(t, n*2*mib, b.committed())
		}
		require.Equal(t, limit/(2*mib), n, "limit %d", limit)
		require.Equal(t, limit, b.committed())
		for range n {
			b.uncommit(2 * mib)
		}
		require.Zero(t, b.committed())
		require.True(t, b.commit(limit), "the whole capacity, after releasing everything")
	}
}

// TestBudgetReclaimsOtherStripes gives every stripe spare bytes, as goroutines on other
// cores leave them: a create that needs them gets them back, and one byte more fails.
func TestBudgetReclaimsOtherStripes(t *testing.T) {
	var b budget
	b.limit.Store(16 * mib)
	for i := range b.stripes {
		b.taken.Add(mib)
		b.stripes[i].spare.Add(mib)
	}
	require.Zero(t, b.committed())
	require.True(t, b.commit(16*mib))
	require.False(t, b.commit(1))
	require.Equal(t, uint64(16*mib), b.committed())
}

// TestBudgetLimitLoweredRefusesSpare lowers the capacity below what is committed: later
// creates fail even where the goroutine's stripe held spare bytes.
func TestBudgetLimitLoweredRefusesSpare(t *testing.T) {
	var b budget
	b.limit.Store(1 << 40)
	require.True(t, b.commit(2*mib))
	require.Equal(t, uint64(2*mib+budgetChunk), b.taken.Load(), "the stripe took a chunk spare")
	b.setLimit(2 * mib)
	require.False(t, b.commit(2*mib))
	require.Equal(t, uint64(2*mib), b.committed())
}

// TestBudgetLimitLoweredBelowCommitted lowers the capacity below what is committed: what is
// released meanwhile does not become room for a create until the committed bytes are back
// under the capacity.
func TestBudgetLimitLoweredBelowCommitted(t *testing.T) {
	var b budget
	b.limit.Store(1 << 40)
	for range 50 {
		require.True(t, b.commit(2*mib))
	}
	b.setLimit(4 * mib)
	for n := 49; n >= 2; n-- {
		b.uncommit(2 * mib)
		require.False(t, b.commit(2*mib), "%d MiB committed, over the capacity of 4 MiB", 2*n)
	}
	b.uncommit(2 * mib)
	require.True(t, b.commit(2*mib), "2 MiB committed, under the capacity of 4 MiB")
	require.Equal(t, uint64(4*mib), b.committed())
}

// TestBudgetReturnsExcess releases far more than the stripes keep: they return the excess
// to the shared count.
func TestBudgetReturnsExcess(t *testing.T) {
	var b budget
	require.True(t, b.commit(16<<30))
	for range 8 << 10 {
		b.uncommit(2 * mib)
	}
	require.Zero(t, b.committed())
	require.LessOrEqual(t, b.taken.Load(), uint64(budgetStripes*2*budgetChunk))
}

// TestBudgetOverflow: with no limit, a size that wraps the count fails, and one that just
// fits succeeds, though the stripe's chunk would not fit beside it.
func TestBudgetOverflow(t *testing.T) {
	var b budget
	require.True(t, b.commit(1))
	require.False(t, b.commit(^uint64(0)))
	require.True(t, b.commit(^uint64(0)-1))
	require.Equal(t, ^uint64(0), b.committed())
}

// TestBudgetConcurrent has goroutines commit and release at random against a small
// capacity, striped and exact: what they hold together never exceeds it, and nothing is
// left committed.
func TestBudgetConcurrent(t *testing.T) {
	for _, exact := range []bool{false, true} {
		const limit = int64(64 * mib)
		var b budget
		b.limit.Store(uint64(limit))
		b.exact.Store(exact)
		var held atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 1))
				var mine []uint64
				for range 20000 {
					if len(mine) > 0 && r.IntN(2) == 0 {
						size := mine[len(mine)-1]
						mine = mine[:len(mine)-1]
						held.Add(-int64(size))
						b.uncommit(size)
						continue
					}
					size := uint64(1+r.IntN(8)) * mib
					if b.commit(size) {
						if h := held.Add(int64(size)); h > limit {
							t.Errorf("exact %v: %d bytes held, over the capacity of %d", exact, h, limit)
							return
						}
						mine = append(mine, size)
					}
				}
				for _, size := range mine {
					held.Add(-int64(size))
					b.uncommit(size)
				}
			})
		}
		wg.Wait()
		require.Zero(t, b.committed(), "exact %v", exact)
		require.True(t, b.commit(uint64(limit)), "exact %v: the whole capacity, after everything was released", exact)
	}
}
