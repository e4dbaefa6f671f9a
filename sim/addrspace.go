package sim

import "github.com/cuvmm/cuvmm/cu"

// addrSpace is the unified virtual address space: the free ranges, the reservations and the
// mappings, each in its own ordered tree keyed by start address, so every operation costs
// O(log n) in the number of live ranges (plus the number of ranges a call spans).
type addrSpace struct {
	free     tree[struct{}] // unreserved ranges; span is their length
	reserved tree[uint64]   // reservations: key base, value size
	mapped   tree[*mapping] // mappings: key base
	// hotMap and hotResv cache the mapping and reservation used last: a program usually
	// maps, sets access to, copies through and unmaps the range it just made, and the
	// cache turns those lookups from a walk down a tree of 100,000 ranges into one check.
	hotMap           *mapping
	hotBase, hotSize uint64
	// unit is the smallest granularity of any device: every reservation's base and size
	// are multiples of it, so every free range starts on it.
	unit uint64
}

// mapping is one cuMemMap: size bytes of an allocation (or multicast object) at base, with
// the access each device has to it.
type mapping struct {
	base, size uint64
	h          *handle // the handle the mapping was made through (cuMemRetainAllocationHandle returns it)
	access     []cu.MemAccessFlags
}

func (m *mapping) end() uint64 { return m.base + m.size }

func (a *addrSpace) init(base, size, unit uint64) {
	a.unit = unit
	a.free.seed, a.reserved.seed, a.mapped.seed = 1, 2, 3
	a.free.insert(base, size, struct{}{})
}

// reserve finds size bytes aligned to align: at hint if that range is free, else at the
// lowest free address (first fit, as the driver places reservations). It returns 0 when no
// free range is large enough.
func (a *addrSpace) reserve(size, align, hint uint64) uint64 {
	if hint != 0 && hint%align == 0 && hint+size > hint {
		if f := a.free.floor(hint); f != nil && hint+size <= f.key+f.span {
			a.take(f, hint, size)
			return hint
		}
	}
	need := size + align - 1
	if need < size {
		return 0
	}
	// A range of size+align-1 bytes always holds an aligned one; when align is the
	// granularity every free range is aligned and need is just size.
	if align <= a.unit {
		need = size
	}
	f := a.free.firstFit(need)
	if f == nil {
		return 0
	}
	addr := (f.key + align - 1) &^ (align - 1)
	if addr+size > f.key+f.span {
		return 0
	}
	a.take(f, addr, size)
	return addr
}

// take removes [addr, addr+size) from the free range f and records the reservation.
func (a *addrSpace) take(f *node[struct{}], addr, size uint64) {
	start, end := f.key, f.key+f.span
	a.free.delete(start)
	if addr > start {
		a.free.insert(start, addr-start, struct{}{})
	}
	if addr+size < end {
		a.free.insert(addr+size, end-(addr+size), struct{}{})
	}
	a.reserved.insert(addr, size, size)
	a.hotBase, a.hotSize = addr, size
}

// release returns the reservation [addr, addr+size) to the free ranges, merging it with its
// neighbours.
func (a *addrSpace) release(addr, size uint64) {
	a.reserved.delete(addr)
	if a.hotBase == addr {
		a.hotBase, a.hotSize = 0, 0
	}
	start, end := addr, addr+size
	if p := a.free.floor(addr); p != nil && p.key+p.span == addr {
		start = p.key
		a.free.delete(p.key)
	}
	if n := a.free.get(end); n != nil {
		end += n.span
		a.free.delete(n.key)
	}
	a.free.insert(start, end-start, struct{}{})
}

// reservation returns the reservation containing addr: its base and size, or ok false.
func (a *addrSpace) reservation(addr uint64) (base, size uint64, ok bool) {
	if addr-a.hotBase < a.hotSize {
		return a.hotBase, a.hotSize, true
	}
	r := a.reserved.floor(addr)
	if r == nil || addr-r.key >= r.val {
		return 0, 0, false
	}
	return r.key, r.val, true
}

// covered reports whether a mapping of [addr, addr+size) may be made or removed: recorded,
// the driver only requires addr to lie in a reservation. The rest may run into an adjacent
// reservation and even into space that was reserved and freed again (it is then kept mapped
// until unmapped, and a reservation that would overlap it cannot be mapped there).
func (a *addrSpace) covered(addr, size uint64) bool {
	if addr+size < addr {
		return false
	}
	_, _, ok := a.reservation(addr)
	return ok
}

// mappingAt returns the mapping containing addr, or nil.
func (a *addrSpace) mappingAt(addr uint64) *mapping {
	if m := a.hotMap; m != nil && addr-m.base < m.size {
		return m
	}
	n := a.mapped.floor(addr)
	if n == nil || addr >= n.val.end() {
		return nil
	}
	a.hotMap = n.val
	return n.val
}

// addMapping records m.
func (a *addrSpace) addMapping(m *mapping) {
	a.mapped.insert(m.base, m.size, m)
	a.hotMap = m
}

// removeMapping forgets m.
func (a *addrSpace) removeMapping(m *mapping) {
	a.mapped.delete(m.base)
	if a.hotMap == m {
		a.hotMap = nil
	}
}

// overlapping calls f on each mapping intersecting [addr, addr+size) in address order
// until f returns false.
func (a *addrSpace) overlapping(addr, size uint64, f func(*mapping) bool) {
	end := addr + size
	if m := a.hotMap; m != nil && m.base == addr && m.end() == end {
		// The common case, one whole mapping: nothing else can intersect it.
		f(m)
		return
	}
	n := a.mapped.floor(addr)
	if n == nil || n.val.end() <= addr {
		n = a.mapped.ceil(addr)
	}
	for n != nil && n.key < end {
		m := n.val
		if !f(m) {
			return
		}
		n = a.mapped.after(m.base)
	}
}

// anyMapped reports whether any mapping intersects [addr, addr+size), in one walk: the
// mapping with the greatest base below the end intersects if it ends after addr.
func (a *addrSpace) anyMapped(addr, size uint64) bool {
	if size == 0 {
		return false
	}
	n := a.mapped.floor(addr + size - 1)
	return n != nil && n.val.end() > addr
}

// wholeMappings reports whether every mapping intersecting [addr, addr+size) lies inside
// it, and how many there are.
func (a *addrSpace) wholeMappings(addr, size uint64) (ok bool, count int) {
	ok = true
	a.overlapping(addr, size, func(m *mapping) bool {
		if m.base < addr || m.end() > addr+size {
			ok = false
			return false
		}
		count++
		return true
	})
	return ok, count
}
