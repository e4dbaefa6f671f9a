package sim

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
)

// The unified virtual address space.
//
// Reservations are placed and freed under one lock (vaSpace.mu), as the driver places them.
// Each reservation holds its own mappings under its own lock, and an operation on a range
// inside one reservation (map, set access, unmap, a copy, a lookup) locks only that
// reservation, which it finds through an index that readers use without any lock:
// goroutines working in different reservations do not wait for each other, and the Sim
// scales with cores where the driver does.
//
// The driver also accepts ranges that run past the reservation they start in: only the
// start of a map or unmap must be reserved, a mapping may run into the next reservation or
// into space that was freed, and one set access or unmap may span adjacent reservations
// (recorded: vmmtest map/across-reservations, edges/map-X-end-into-freed-Y,
// faults/set-access-D-end-into-E, edges/unmap-X-and-freed-Y). An operation on such a range takes vaSpace.mu and then every reservation
// the range touches, in address order. A mapping that runs past the end of its reservation
// (a crosser) is listed in each later reservation it runs into and in vaSpace.crossers, so
// that the one-reservation path still sees it.
//
// Lock order: vaSpace.mu, then reservations by address, then handle shards, then the
// multicast lock, then shareMu and stores.

// vaSpace is the address space of one Sim.
type vaSpace struct {
	mu       sync.Mutex
	free     tree[struct{}] // unreserved ranges; span is their length
	crossers []*mapping     // mappings that run past the end of their reservation
	ncross   atomic.Int32   // len(crossers), for the paths that do not hold mu
	n        int            // reservations
	index    vaIndex        // every reservation, by address
	spare    []*resv        // freed reservations, for reuse
	// calls counts what is counted under mu: reservations placed and freed, operations on
	// ranges spanning reservations, and the counts of reservations freed since.
	calls [numOps]uint64
	base  uint64
	end   uint64
	// unit is the smallest granularity of any device: every reservation's base and size
	// are multiples of it, so every free range starts on it.
	unit uint64
}

// resv is one reservation and the mappings that start in it.
type resv struct {
	base, size uint64 // fixed for the reservation's life

	mu    sync.Mutex
	freed bool       // set by cuMemAddressFree; a lookup that raced it finds nothing
	maps  []*mapping // the mappings starting in the reservation, sorted by base
	in    []*mapping // crossers from earlier reservations that run into this one
	first [1]*mapping
	calls [numResvOps]uint64 // calls on the reservation, counted under its lock
	// Reservations of different goroutines do not share a cache line pair: with its size
	// a multiple of 128, the allocator places it at an address aligned to 128 bytes.
	_ [16]byte
}

// The calls a reservation counts itself, under the lock they take anyway, so that the
// commonest calls write no counter shared by every goroutine.
const (
	resvMap = iota
	resvUnmap
	resvSetAccess
	numResvOps
)

var resvOps = [numResvOps]Op{OpMap, OpUnmap, OpSetAccess}

// count counts one call (resvMap, ...) under the lock the hold has; false when it has none
// (nothing reserved at the range's start), for the caller to count otherwise.
func (h *hold) count(k int) bool {
	switch {
	case h.r != nil:
		h.r.calls[k]++
	case h.all:
		h.a.calls[resvOps[k]]++
	default:
		return false
	}
	return true
}

// newResv makes a reservation whose first mapping costs no allocation of its own, reusing
// a freed one where it can. The caller holds a.mu.
func (a *vaSpace) newResv(base, size uint64) *resv {
	var r *resv
	if n := len(a.spare); n > 0 && size>>a.index.shift <= radixMaxGranules {
		r, a.spare = a.spare[n-1], a.spare[:n-1]
	} else {
		r = new(resv)
	}
	// A lookup may still hold r from before it was freed: it reads the fields under the
	// lock, and finds them changed.
	r.mu.Lock()
	r.base, r.size, r.freed = base, size, false
	r.maps, r.in = r.first[:0], nil
	r.mu.Unlock()
	return r
}

func (r *resv) end() uint64 { return r.base + r.size }

func (r *resv) contains(addr uint64) bool { return addr-r.base < r.size }

// after returns the index of the first mapping of r starting after addr. A sorted slice
// costs no allocation per mapping, and reservations hold few mappings or, for large ones,
// move pointers in memory at a rate far above the driver's.
func (r *resv) after(addr uint64) int {
	lo, hi := 0, len(r.maps)
	for lo < hi {
		if mid := (lo + hi) / 2; r.maps[mid].base <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (r *resv) insert(m *mapping) { r.maps = slices.Insert(r.maps, r.after(m.base), m) }

func (r *resv) delete(m *mapping) {
	if i := r.after(m.base) - 1; i >= 0 && r.maps[i] == m {
		r.maps = slices.Delete(r.maps, i, i+1)
	}
}

// mapping is one cuMemMap: size bytes of an allocation (or multicast object) at base, with
// the access each device has to it. access is guarded by the locks of the reservations the
// mapping lies in: every operation that reads or changes it holds one of them, and one that
// changes a crosser's holds them all.
type mapping struct {
	base, size uint64
	owner      *resv
	h          *handle // the handle the mapping was made through (cuMemRetainAllocationHandle returns it)
	access     []cu.MemAccessFlags
	crosses    bool // runs past the end of owner
	inline     [8]cu.MemAccessFlags
	buffer     atomic.Uint64 // BUFFER_ID, given when a pointer query first asks for it (pointer.go)
}

// mappings recycles mapping objects: a map and an unmap are the commonest calls, and an
// unmapped mapping is referenced from nowhere.
var mappings = sync.Pool{New: func() any { return new(mapping) }}

// newMapping makes a mapping with no access for any of n devices; its access flags live
// in the mapping itself when they fit.
func newMapping(base, size uint64, h *handle, n int) *mapping {
	m := mappings.Get().(*mapping)
	m.base, m.size, m.h = base, size, h
	if n <= len(m.inline) {
		m.access = m.inline[:n]
		clear(m.access)
	} else {
		m.access = make([]cu.MemAccessFlags, n)
	}
	return m
}

// recycle returns a mapping that was removed from every list to the pool.
func (m *mapping) recycle() {
	*m = mapping{}
	mappings.Put(m)
}

func (m *mapping) end() uint64 { return m.base + m.size }

// maxSpare bounds the freed reservations kept for reuse.
const maxSpare = 64

func (a *vaSpace) init(base, size, unit uint64) {
	a.unit = unit
	a.base, a.end = base, base+size
	a.free.seed = 1
	a.free.insert(base, size, struct{}{})
	a.index.init(base, size, unit)
}

// count returns the number of reservations and of mappings, and adds the calls counted in
// the address space to calls.
func (a *vaSpace) count(calls *[numOps]uint64) (reservations, mappings int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, n := range a.calls {
		calls[i] += n
	}
	for r := range a.all(a.base, a.end) {
		r.mu.Lock()
		mappings += len(r.maps)
		for k, n := range r.calls {
			calls[resvOps[k]] += n
		}
		r.mu.Unlock()
	}
	return a.n, mappings
}

// all yields the reservations intersecting [addr, end) in address order, walking the
// index over reserved space and the free tree over unreserved space (together they tile
// the address space). The caller holds a.mu.
func (a *vaSpace) all(addr, end uint64) func(func(*resv) bool) {
	return func(yield func(*resv) bool) {
		cur := max(addr, a.base)
		if r := a.index.lookup(cur); r != nil {
			cur = r.base
		}
		for cur < min(end, a.end) {
			if r := a.index.lookup(cur); r != nil {
				if !yield(r) {
					return
				}
				cur = r.end()
				continue
			}
			f := a.free.floor(cur)
			if f == nil || f.key+f.span <= cur {
				return // not reachable when the tiling holds
			}
			cur = f.key + f.span
		}
	}
}

// reserve finds size bytes aligned to align: at hint if that range is free (and aligned to
// hintAlign), else at the lowest free address (first fit, as the driver places
// reservations). It returns 0 when no free range is large enough. The caller holds a.mu.
func (a *vaSpace) reserve(size, align, hintAlign, hint uint64) uint64 {
	if hint != 0 && hint%hintAlign == 0 && hint+size > hint {
		if f := a.free.floor(hint); f != nil && hint+size <= f.key+f.span {
			a.take(f, hint, size)
			return hint
		}
	}
	return a.firstFit(size, align, 0)
}

// firstFit reserves size bytes at the lowest free address aligned to align, other than
// avoid (0: none), where a reservation would also block the next one: as if [avoid,
// avoid+size) were taken first. It returns 0 when no free range is large enough. The
// caller holds a.mu.
func (a *vaSpace) firstFit(size, align, avoid uint64) uint64 {
	// The lowest free range that holds size bytes at an aligned address: the ranges large
	// enough in address order, until one fits once its start is aligned.
	for f := a.free.firstFit(size); f != nil; f = a.free.firstFitFrom(f.key+1, size) {
		addr := (f.key + align - 1) &^ (align - 1)
		if avoid != 0 && addr == avoid && addr+size > addr {
			addr = (avoid + size + align - 1) &^ (align - 1)
		}
		if addr >= f.key && addr+size <= f.key+f.span && addr+size > addr {
			a.take(f, addr, size)
			return addr
		}
	}
	return 0
}

// take removes [addr, addr+size) from the free range f and records the reservation, with
// the crossers that already run into it. The caller holds a.mu.
func (a *vaSpace) take(f *node[struct{}], addr, size uint64) {
	start, end := f.key, f.key+f.span
	switch {
	case addr == start && addr+size == end:
		a.free.delete(start)
	case addr == start:
		a.free.resize(start, addr+size, end-(addr+size))
	default:
		a.free.resize(start, start, addr-start)
		if addr+size < end {
			a.free.insert(addr+size, end-(addr+size), struct{}{})
		}
	}
	r := a.newResv(addr, size)
	for _, m := range a.crossers {
		if m.base < r.end() && r.base < m.end() {
			r.in = append(r.in, m)
		}
	}
	a.index.set(r)
	a.n++
}

// unreserve frees the reservation at addr if it is exactly [addr, addr+size) with nothing
// mapped in it, and reports why not otherwise ("" on success). The caller holds a.mu.
func (a *vaSpace) unreserve(addr, size uint64) string {
	r := a.index.lookup(addr)
	if r == nil || r.base != addr || r.size != size {
		return "not a reservation"
	}
	r.mu.Lock()
	if len(r.maps) > 0 || len(r.in) > 0 {
		r.mu.Unlock()
		return "reservation still has mappings" // recorded: vmmtest free/while-mapped, faults/free-D-while-mapped-into-E
	}
	r.freed = true
	clear(r.maps[:cap(r.maps)])
	for k, n := range r.calls {
		a.calls[resvOps[k]] += n
	}
	r.calls = [numResvOps]uint64{}
	r.mu.Unlock()
	a.index.clear(r)
	a.n--
	// Only reservations in the radix table are recycled: the sorted list of large ones is
	// read without locks, so its entries never change.
	if size>>a.index.shift <= radixMaxGranules && len(a.spare) < maxSpare {
		a.spare = append(a.spare, r)
	}
	// Give the range back, merged with the free ranges around it.
	end := addr + size
	prev := a.free.floor(addr)
	if prev != nil && prev.key+prev.span != addr {
		prev = nil
	}
	next := a.free.get(end)
	switch {
	case prev != nil && next != nil:
		span := next.span
		a.free.delete(end)
		a.free.resize(prev.key, prev.key, end+span-prev.key)
	case prev != nil:
		a.free.resize(prev.key, prev.key, end-prev.key)
	case next != nil:
		a.free.resize(end, addr, next.span+size)
	default:
		a.free.insert(addr, size, struct{}{})
	}
	return ""
}

// hold is the part of the address space one operation has locked: the reservation its
// range lies in, or, with all set (and vaSpace.mu held), every reservation the range
// touches. A hold with neither found nothing reserved at the range's start.
type hold struct {
	a   *vaSpace
	r   *resv   // the one reservation
	rs  []*resv // all: the reservations the range touches, by address
	all bool
}

// lock locks what an operation on [addr, addr+size) needs, into h. size 0 means one byte.
func (a *vaSpace) lock(h *hold, addr, size uint64) {
	h.a = a
	end := addr + max(size, 1)
	if end < addr {
		end = ^uint64(0) // a range that wraps: lock to the top; its checks fail it
	}
	r := a.index.lookup(addr)
	if r != nil {
		// A reservation's bounds are read under its lock: freed meanwhile, it may have been
		// recycled for a reservation elsewhere. Anything but the one case where the whole
		// range lies in one live reservation takes the long way, which is always right.
		r.mu.Lock()
		if !r.freed && r.contains(addr) && end <= r.end() {
			h.r = r
			return
		}
		r.mu.Unlock()
	} else if a.ncross.Load() == 0 {
		return // nothing reserved at addr, and no mapping runs into unreserved space
	}
	a.mu.Lock()
	h.all = true
	for r := range a.all(addr, end) {
		r.mu.Lock()
		h.rs = append(h.rs, r)
	}
}

func (h *hold) unlock() {
	if h.r != nil {
		h.r.mu.Unlock()
	}
	for _, r := range h.rs {
		r.mu.Unlock()
	}
	if h.all {
		h.a.mu.Unlock()
	}
	*h = hold{}
}

// resvAt returns the held reservation containing addr, or nil.
func (h *hold) resvAt(addr uint64) *resv {
	if h.r != nil && h.r.contains(addr) {
		return h.r
	}
	for _, r := range h.rs {
		if r.contains(addr) {
			return r
		}
	}
	return nil
}

// covered reports whether a mapping of [addr, addr+size) may be made or removed: the driver
// only requires addr to lie in a reservation. The rest may run into an adjacent reservation
// and even into space that was reserved and freed again (it is then kept mapped until
// unmapped, and a reservation that would overlap it cannot be mapped there). Recorded:
// vmmtest map/past-reservation-end, edges/map-X-end-into-freed-Y, edges/map-freed-Y.
func (h *hold) covered(addr, size uint64) bool {
	// A range may end at the very top of the address space (an unmap of [addr, 2^64) with
	// nothing mapped there succeeds, recorded: vmmtest limits/unmap-size-to-top), not run
	// past it.
	end, carry := bits.Add64(addr, size, 0)
	return (carry == 0 || end == 0) && h.resvAt(addr) != nil
}

// mappingAt returns the mapping containing addr, or nil.
func (h *hold) mappingAt(addr uint64) *mapping {
	if r := h.resvAt(addr); r != nil {
		if i := r.after(addr) - 1; i >= 0 && addr < r.maps[i].end() {
			return r.maps[i]
		}
		for _, m := range r.in {
			if addr-m.base < m.size {
				return m
			}
		}
		return nil
	}
	if h.all {
		for _, m := range h.a.crossers {
			if addr-m.base < m.size {
				return m
			}
		}
	}
	return nil
}

// overlapping calls f on each mapping intersecting [addr, addr+size) in address order until
// f returns false.
func (h *hold) overlapping(addr, size uint64, f func(*mapping) bool) {
	end := addr + size
	if !h.all {
		r := h.r
		if r == nil {
			return
		}
		// Crossers start before the reservation, so they come first.
		for _, m := range r.in {
			if m.base < end && addr < m.end() && !f(m) {
				return
			}
		}
		r.eachFrom(addr, end, f)
		return
	}
	var ms []*mapping
	add := func(m *mapping) bool {
		if m.base < end && addr < m.end() && !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
		return true
	}
	for _, r := range h.rs {
		for _, m := range r.in {
			add(m)
		}
		r.eachFrom(addr, end, add)
	}
	for _, m := range h.a.crossers {
		add(m)
	}
	slices.SortFunc(ms, func(x, y *mapping) int { return cmp.Compare(x.base, y.base) })
	for _, m := range ms {
		if !f(m) {
			return
		}
	}
}

// eachFrom calls f on the mappings starting in r that intersect [addr, end), in address
// order, until f returns false.
func (r *resv) eachFrom(addr, end uint64, f func(*mapping) bool) {
	lo, hi := r.span(addr, end)
	for _, m := range r.maps[lo:hi] {
		if !f(m) {
			return
		}
	}
}

// span returns the mappings starting in r that intersect [addr, end), as r.maps[lo:hi].
func (r *resv) span(addr, end uint64) (lo, hi int) {
	lo = r.after(addr) - 1
	if lo < 0 || r.maps[lo].end() <= addr {
		lo++
	}
	return lo, r.after(end - 1)
}

// crossersIn reports whether a crosser into r intersects [addr, end).
func (r *resv) crossersIn(addr, end uint64) bool {
	for _, m := range r.in {
		if m.base < end && addr < m.end() {
			return true
		}
	}
	return false
}

// anyMapped reports whether any mapping intersects [addr, addr+size).
func (h *hold) anyMapped(addr, size uint64) bool {
	if size == 0 {
		return false
	}
	if r := h.r; r != nil {
		lo, hi := r.span(addr, addr+size)
		return lo < hi || r.crossersIn(addr, addr+size)
	}
	found := false
	h.overlapping(addr, size, func(*mapping) bool { found = true; return false })
	return found
}

// whole returns the mappings intersecting [addr, addr+size) in address order, and whether
// every one lies inside the range. The slice may share memory with the reservation's own
// (buf is used where it does not): to remove the mappings, go from the last to the first.
func (h *hold) whole(addr, size uint64, buf []*mapping) (ms []*mapping, ok bool) {
	end := addr + size
	if r := h.r; r != nil {
		lo, hi := r.span(addr, end)
		ms = r.maps[lo:hi]
		if r.crossersIn(addr, end) {
			return ms, false // a crosser starts before the reservation, so before addr
		}
		// Mappings do not overlap, so only the first and the last can stick out.
		return ms, lo == hi || r.maps[lo].base >= addr && r.maps[hi-1].end() <= end
	}
	ok = true
	ms = buf[:0]
	h.overlapping(addr, size, func(m *mapping) bool {
		ms = append(ms, m)
		ok = ok && m.base >= addr && m.end() <= end
		return true
	})
	return ms, ok
}

// add records m, whose start the hold covers; a crosser needs a hold of all it touches.
func (h *hold) add(m *mapping) {
	r := h.resvAt(m.base)
	m.owner = r
	r.insert(m)
	if m.end() <= r.end() {
		return
	}
	m.crosses = true
	for _, o := range h.rs {
		if o != r && o.base < m.end() && m.base < o.end() {
			o.in = append(o.in, m)
		}
	}
	h.a.crossers = append(h.a.crossers, m)
	h.a.ncross.Add(1)
}

// remove forgets m; for a crosser the hold covers all it touches (an unmap covers the
// whole mapping).
func (h *hold) remove(m *mapping) {
	m.owner.delete(m)
	if !m.crosses {
		return
	}
	drop := func(ms []*mapping) []*mapping {
		return slices.DeleteFunc(ms, func(x *mapping) bool { return x == m })
	}
	for _, o := range h.rs {
		o.in = drop(o.in)
	}
	h.a.crossers = drop(h.a.crossers)
	h.a.ncross.Add(-1)
}

// The index finds the reservation containing an address without a lock. Reservations of up
// to radixMaxGranules units are entered in a three-level radix table at every unit they
// cover (one to three loads per lookup, whatever the number of reservations); larger ones,
// few by nature, are kept in a sorted slice that is replaced whole when it changes. Writers
// hold vaSpace.mu.
const (
	radixBits        = 12
	radixFan         = 1 << radixBits
	radixMaxGranules = 512
)

type radixLeaf [radixFan]atomic.Pointer[resv]

type radixMid [radixFan]atomic.Pointer[radixLeaf]

type vaIndex struct {
	base, granules uint64
	shift          uint
	top            []atomic.Pointer[radixMid]
	big            atomic.Pointer[[]*resv]
}

func (x *vaIndex) init(base, size, unit uint64) {
	x.base = base
	for unit > 1 {
		unit >>= 1
		x.shift++
	}
	x.granules = size >> x.shift
	x.top = make([]atomic.Pointer[radixMid], (x.granules>>(2*radixBits))+1)
}

func (x *vaIndex) lookup(addr uint64) *resv {
	if addr >= x.base {
		if g := (addr - x.base) >> x.shift; g < x.granules {
			if mid := x.top[g>>(2*radixBits)].Load(); mid != nil {
				if leaf := mid[(g>>radixBits)&(radixFan-1)].Load(); leaf != nil {
					if r := leaf[g&(radixFan-1)].Load(); r != nil {
						return r
					}
				}
			}
		}
	}
	if big := x.big.Load(); big != nil {
		rs := *big
		lo, hi := 0, len(rs) // the first reservation starting after addr
		for lo < hi {
			if mid := (lo + hi) / 2; rs[mid].base <= addr {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo > 0 && rs[lo-1].contains(addr) {
			return rs[lo-1]
		}
	}
	return nil
}

func (x *vaIndex) set(r *resv) { x.store(r, r) }

func (x *vaIndex) clear(r *resv) { x.store(r, nil) }

func (x *vaIndex) store(r, v *resv) {
	first, n := (r.base-x.base)>>x.shift, r.size>>x.shift
	if n > radixMaxGranules {
		old := x.big.Load()
		var rs []*resv
		if old != nil {
			rs = *old
		}
		if v != nil {
			i, _ := slices.BinarySearchFunc(rs, r.base, func(e *resv, b uint64) int { return cmp.Compare(e.base, b) })
			rs = slices.Insert(slices.Clone(rs), i, r)
		} else {
			rs = slices.DeleteFunc(slices.Clone(rs), func(e *resv) bool { return e == r })
		}
		x.big.Store(&rs)
		return
	}
	for g := first; g < first+n; g++ {
		mid := x.top[g>>(2*radixBits)].Load()
		if mid == nil {
			if v == nil {
				continue
			}
			mid = new(radixMid)
			x.top[g>>(2*radixBits)].Store(mid)
		}
		leaf := mid[(g>>radixBits)&(radixFan-1)].Load()
		if leaf == nil {
			if v == nil {
				continue
			}
			leaf = new(radixLeaf)
			mid[(g>>radixBits)&(radixFan-1)].Store(leaf)
		}
		leaf[g&(radixFan-1)].Store(v)
	}
}
