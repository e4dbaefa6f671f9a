package sim

import "sync/atomic"

// budget counts the bytes committed against one capacity (a device's memory, or the
// host's) without a cache line that every create and release writes. Each stripe keeps
// spare bytes it has taken from the capacity: a create on a core takes from its stripe, a
// release gives back to its stripe, and only refills and returns of a stripe's excess
// touch the shared count. A create the shared count cannot satisfy first pulls every
// stripe's spare back, so it fails only when what is really committed leaves no room.
type budget struct {
	limit atomic.Uint64 // 0: no limit
	// exact is set once a test has set the limit (SetCapacity): from then on every create
	// and release goes to the shared count, as with one counter, so that a capacity lowered
	// below what is committed holds exactly.
	exact   atomic.Bool
	_       [52]byte      // exact, read by every create and release, on a line rarely written
	taken   atomic.Uint64 // the bytes committed plus the bytes the stripes hold spare
	_       [56]byte
	stripes [budgetStripes]struct {
		spare atomic.Uint64
		_     [56]byte
	}
}

// budgetStripes is how many stripes a budget has: as many as stripe picks from, since
// fewer would put some of a few busy goroutines on one stripe.
const budgetStripes = stripes

// budgetChunk is what a stripe takes from the shared count beyond a create's size, when
// the capacity has room for it; a stripe holding more than twice this spare returns the
// excess.
const budgetChunk = 64 << 20

// commit counts size more bytes, or reports false when the capacity has no room for them.
func (b *budget) commit(size uint64) bool {
	if !b.exact.Load() {
		st := &b.stripes[stripe()%budgetStripes]
		for sp := st.spare.Load(); sp >= size; sp = st.spare.Load() {
			if st.spare.CompareAndSwap(sp, sp-size) {
				return true
			}
		}
		if b.take(size, budgetChunk) {
			st.spare.Add(budgetChunk)
			return true
		}
	}
	if b.take(size, 0) {
		return true
	}
	// Exact budgets too: a create or release that read exact before setLimit set it may
	// still have left spare on its stripe after setLimit's reclaim.
	b.reclaim()
	return b.take(size, 0)
}

// take counts size+extra bytes on the shared count if the capacity has room for them.
func (b *budget) take(size, extra uint64) bool {
	limit, want := b.limit.Load(), size+extra
	if want < size {
		return false
	}
	for {
		c := b.taken.Load()
		n := c + want
		if n < c || limit != 0 && n > limit {
			return false
		}
		if b.taken.CompareAndSwap(c, n) {
			return true
		}
	}
}

// uncommit counts size bytes no longer committed.
func (b *budget) uncommit(size uint64) {
	if b.exact.Load() {
		b.taken.Add(-size)
		return
	}
	st := &b.stripes[stripe()%budgetStripes]
	if n := st.spare.Add(size); n > 2*budgetChunk && st.spare.CompareAndSwap(n, budgetChunk) {
		b.taken.Add(-(n - budgetChunk))
	}
}

// reclaim returns every stripe's spare bytes to the shared count.
func (b *budget) reclaim() {
	for i := range b.stripes {
		if n := b.stripes[i].spare.Swap(0); n > 0 {
			b.taken.Add(-n)
		}
	}
}

// setLimit changes the capacity; creates past it fail from then on, and the budget counts
// exactly (exact).
func (b *budget) setLimit(n uint64) {
	b.exact.Store(true)
	b.limit.Store(n)
	b.reclaim()
}

// committed returns the bytes committed: exact when no call is in flight; while calls
// run, off by at most the bytes moving between a stripe and the shared count.
func (b *budget) committed() uint64 {
	var spare uint64
	for i := range b.stripes {
		spare += b.stripes[i].spare.Load()
	}
	if taken := b.taken.Load(); taken > spare {
		return taken - spare
	}
	return 0
}
