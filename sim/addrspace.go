package sim

import (
	"math/bits"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/treap"
)

// vaSpace is the unified virtual address space of one Sim: three treaps keyed by address.
// free holds the unreserved ranges and places reservations first fit, resvs the
// reservations, maps the mappings (each node's span is its range's length). Mappings are
// one tree rather than lists per reservation because only the start of a mapping must be
// reserved: one may run into the next reservation or into space freed since, and a set
// access or an unmap may span reservations (recorded: vmmtest map/across-reservations,
// edges/map-X-end-into-freed-Y, faults/set-access-D-end-into-E,
// edges/unmap-X-and-freed-Y). Mappings never overlap.
type vaSpace struct {
	free  treap.Tree[struct{}]
	resvs treap.Tree[struct{}]
	maps  treap.Tree[mapping]
	base  uint64
	end   uint64
	// unit is the smallest granularity of any device: every reservation's base and size
	// are multiples of it, so every free range starts on it.
	unit uint64
}

// mapping is one cuMemMap: size bytes of an allocation (or multicast object) at base, with
// the access each device has to it. It lives in its node of vaSpace.maps.
type mapping struct {
	base, size uint64
	h          *handle // the handle the mapping was made through (cuMemRetainAllocationHandle returns it)
	access     []cu.MemAccessFlags
	inline     [8]cu.MemAccessFlags
	buffer     uint64 // BUFFER_ID, given when a pointer query first asks for it (pointer.go)
}

func (m *mapping) end() uint64 { return m.base + m.size }

// device returns the device that owns a mapping's memory (-1: host or multicast).
func (m *mapping) device() int {
	if m.h.mem != nil {
		return m.h.mem.dev
	}
	return -1
}

func (a *vaSpace) init(base, size, unit uint64) {
	a.unit = unit
	a.base, a.end = base, base+size
	a.free.Seed = 1
	a.free.Insert(base, size, struct{}{})
}

// reserve finds size bytes aligned to align: at hint if that range is free (and aligned to
// hintAlign), else at the lowest free address (first fit, as the driver places
// reservations). It returns 0 when no free range is large enough.
func (a *vaSpace) reserve(size, align, hintAlign, hint uint64) uint64 {
	if hint != 0 && hint%hintAlign == 0 && hint+size > hint {
		if f := a.free.Floor(hint); f != nil && hint+size <= f.Key+f.Span {
			a.take(f, hint, size)
			return hint
		}
	}
	return a.firstFit(size, align, 0)
}

// firstFit reserves size bytes at the lowest free address aligned to align, other than
// avoid (0: none), where a reservation would also block the next one: as if [avoid,
// avoid+size) were taken first. It returns 0 when no free range is large enough.
func (a *vaSpace) firstFit(size, align, avoid uint64) uint64 {
	// The lowest free range that holds size bytes at an aligned address: the ranges large
	// enough in address order, until one fits once its start is aligned.
	for f := a.free.FirstFit(size); f != nil; f = a.free.FirstFitFrom(f.Key+1, size) {
		addr := (f.Key + align - 1) &^ (align - 1)
		if avoid != 0 && addr == avoid && addr+size > addr {
			addr = (avoid + size + align - 1) &^ (align - 1)
		}
		if addr >= f.Key && addr+size <= f.Key+f.Span && addr+size > addr {
			a.take(f, addr, size)
			return addr
		}
	}
	return 0
}

// take removes [addr, addr+size) from the free range f and records the reservation.
func (a *vaSpace) take(f *treap.Node[struct{}], addr, size uint64) {
	start, end := f.Key, f.Key+f.Span
	switch {
	case addr == start && addr+size == end:
		a.free.Delete(start)
	case addr == start:
		a.free.Resize(start, addr+size, end-(addr+size))
	default:
		a.free.Resize(start, start, addr-start)
		if addr+size < end {
			a.free.Insert(addr+size, end-(addr+size), struct{}{})
		}
	}
	a.resvs.Insert(addr, size, struct{}{})
}

// unreserve frees the reservation at addr if it is exactly [addr, addr+size) with nothing
// mapped in it, and says why not otherwise ("" on success).
func (a *vaSpace) unreserve(addr, size uint64) string {
	if r := a.resvs.Get(addr); r == nil || r.Span != size {
		return "not a reservation"
	}
	if a.anyMapped(addr, size) {
		return "reservation still has mappings" // recorded: vmmtest free/while-mapped, faults/free-D-while-mapped-into-E
	}
	a.resvs.Delete(addr)
	// Give the range back, merged with the free ranges around it.
	end := addr + size
	prev := a.free.Floor(addr)
	if prev != nil && prev.Key+prev.Span != addr {
		prev = nil
	}
	next := a.free.Get(end)
	switch {
	case prev != nil && next != nil:
		span := next.Span
		a.free.Delete(end)
		a.free.Resize(prev.Key, prev.Key, end+span-prev.Key)
	case prev != nil:
		a.free.Resize(prev.Key, prev.Key, end-prev.Key)
	case next != nil:
		a.free.Resize(end, addr, next.Span+size)
	default:
		a.free.Insert(addr, size, struct{}{})
	}
	return ""
}

// resvAt returns the reservation containing addr as its base and size; ok is false when
// nothing is reserved there.
func (a *vaSpace) resvAt(addr uint64) (base, size uint64, ok bool) {
	if r := a.resvs.Floor(addr); r != nil && addr-r.Key < r.Span {
		return r.Key, r.Span, true
	}
	return 0, 0, false
}

// covered reports whether a mapping of [addr, addr+size) may be made or removed: the driver
// only requires addr to lie in a reservation. The rest may run into an adjacent reservation
// and even into space that was reserved and freed again (it is then kept mapped until
// unmapped, and a reservation that would overlap it cannot be mapped there). Recorded:
// vmmtest map/past-reservation-end, edges/map-X-end-into-freed-Y, edges/map-freed-Y.
func (a *vaSpace) covered(addr, size uint64) bool {
	// A range may end at the very top of the address space (an unmap of [addr, 2^64) with
	// nothing mapped there succeeds, recorded: vmmtest limits/unmap-size-to-top), not run
	// past it.
	end, carry := bits.Add64(addr, size, 0)
	_, _, ok := a.resvAt(addr)
	return (carry == 0 || end == 0) && ok
}

// mappingAt returns the mapping containing addr, or nil.
func (a *vaSpace) mappingAt(addr uint64) *mapping {
	if n := a.maps.Floor(addr); n != nil && addr-n.Key < n.Span {
		return &n.Val
	}
	return nil
}

// overlapping calls f on each mapping intersecting [addr, addr+size) in address order until
// f returns false. A range that wraps runs to the top of the address space.
func (a *vaSpace) overlapping(addr, size uint64, f func(*mapping) bool) {
	if size == 0 {
		return
	}
	last := addr + size - 1
	if last < addr {
		last = ^uint64(0)
	}
	n := a.maps.Floor(addr)
	if n == nil || addr-n.Key >= n.Span {
		n = a.maps.Ceil(addr)
	}
	for ; n != nil && n.Key <= last; n = a.maps.Ceil(n.Key + 1) {
		// Mappings do not overlap: none after n starts before n's end.
		if !f(&n.Val) || n.Key+n.Span-1 >= last {
			return
		}
	}
}

// anyMapped reports whether any mapping intersects [addr, addr+size): the last mapping
// starting in the range or before it does, if any does, as mappings do not overlap.
func (a *vaSpace) anyMapped(addr, size uint64) bool {
	if size == 0 {
		return false
	}
	last := addr + size - 1
	if last < addr {
		last = ^uint64(0)
	}
	n := a.maps.Floor(last)
	return n != nil && n.Key+n.Span > addr
}

// whole returns the mappings intersecting [addr, addr+size) in address order, appended to
// buf[:0], and whether every one lies inside the range.
func (a *vaSpace) whole(addr, size uint64, buf []*mapping) (ms []*mapping, ok bool) {
	ok = true
	ms = buf[:0]
	a.overlapping(addr, size, func(m *mapping) bool {
		ms = append(ms, m)
		ok = ok && m.base >= addr && m.end()-1 <= addr+size-1
		return true
	})
	return ms, ok
}

// addMapping records a mapping of [base, base+size) through h with no access for any of n
// devices.
func (a *vaSpace) addMapping(base, size uint64, h *handle, n int) {
	m := &a.maps.Insert(base, size, mapping{base: base, size: size, h: h}).Val
	if n <= len(m.inline) {
		m.access = m.inline[:n]
	} else {
		m.access = make([]cu.MemAccessFlags, n)
	}
}
