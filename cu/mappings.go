package cu

import (
	"cmp"
	"slices"
)

// The mapping records.
//
// The driver corrupts its heap when a cuMemUnmap that frees an allocation (its last mapping,
// with no handle reference left) runs at the same time as another unmap or release of that
// allocation: recorded on an H100 with driver 580, the C program bench/c/droprace.c kills
// the process with SIGSEGV or a glibc heap abort within seconds, while every other pair of
// concurrent drops it tries (two releases, a release and an unmap that is not the last, two
// unmaps that are not the last) runs clean. cuMemUnmap names an address range, not an
// allocation, so cu records each mapping it makes (start, size and the handle's slot) in
// the shards' maps, by start, to know which allocations an unmap drops, and holds their
// drop locks across the driver call; so does a retain through a mapping, which can revive
// a released allocation. A call on one allocation still never waits for one on another.
// A record goes only once the driver has unmapped its mapping, under its drop lock: so a
// retain or an unmap, having taken the drop locks of the records it looked up, looks again
// and starts over if they changed meanwhile.

// mapping is a recorded mapping.
type mapping struct {
	size uint64
	idx  uint32 // the slot of the handle it was made through
	seq  uint32 // its shard's count of records: tells it from a later mapping at its start
}

// entry is a record as the lookups return it.
type entry struct {
	start uint64
	mapping
}

// mapped records the mapping of [start, start+size) that the driver just made of h, whose
// slot s the caller pinned for the call, and unpins it: recorded while pinned, the mapping
// is seen by the handle's last release, which drains the pins first.
func (t *handleTable) mapped(s *slot, h MemHandle, start, size uint64) {
	s.maps.Add(1)
	sh := t.shard(start)
	sh.mu.Lock()
	if sh.maps == nil {
		sh.maps = map[uint64]mapping{}
	}
	sh.seq++
	stale, had := sh.maps[start]
	sh.maps[start] = mapping{size, uint32(h), sh.seq}
	sh.mu.Unlock()
	// Unpinned before another drop lock is waited for: the stale record may be this handle's
	// own, whose last release holds that lock while it drains the pins.
	s.unpin()
	if had {
		// A mapping the driver no longer has, whose unmap has not removed its record yet (and
		// now leaves it): count it gone, as that unmap would have.
		o := t.slot(stale.idx)
		o.drop.Lock()
		t.unmapped(stale.idx)
		o.drop.Unlock()
	}
}

// unmapped counts one mapping of slot idx gone, and forgets the slot if the driver freed
// its allocation; the caller holds the drop lock.
func (t *handleTable) unmapped(idx uint32) {
	if s := t.slot(idx); s.maps.Add(-1) == 0 && s.refs.Load() == 0 {
		t.forget(idx, s.drv.Load())
	}
}

// unmap runs driverUnmap on [start, start+size) holding the drop locks of the allocations
// mapped there, and forgets those mappings if it succeeds.
func (t *handleTable) unmap(start, size uint64, driverUnmap func() error) error {
	end := start + size
	if end < start {
		end = ^uint64(0)
	}
	var buf, again [4]entry
	for {
		es := t.lookup(start, end, buf[:0])
		// Each slot's lock once, in slot order, so that two unmaps never wait for each other
		// in a cycle. Exclusive even while the allocation has a reference: two unmaps of one
		// range would otherwise both pass, and the second, whose lookup a record the first
		// has not removed yet carries past a mapping made meanwhile, would unmap that mapping
		// without its lock.
		for i := range es {
			if i == 0 || es[i-1].idx != es[i].idx {
				t.slot(es[i].idx).drop.Lock()
			}
		}
		// Mapped or unmapped in the range before the locks were held: look again.
		if !slices.EqualFunc(es, t.lookup(start, end, again[:0]), func(a, b entry) bool {
			return a.start == b.start && a.mapping == b.mapping
		}) {
			t.unlock(es)
			continue
		}
		err := driverUnmap()
		for _, e := range es {
			if err == nil {
				t.remove(e)
			}
		}
		t.unlock(es)
		return err
	}
}

// unlock lets go of the drop locks an unmap holds for es.
func (t *handleTable) unlock(es []entry) {
	for i, e := range es {
		if i == 0 || es[i-1].idx != e.idx {
			t.slot(e.idx).drop.Unlock()
		}
	}
}

// remove forgets the record e, which the driver has unmapped, and counts it gone, unless a
// map at its start has replaced it (mapped counts it gone then); the caller holds e's drop
// lock.
func (t *handleTable) remove(e entry) {
	sh := t.shard(e.start)
	sh.mu.Lock()
	ours := sh.maps[e.start] == e.mapping // a record's size is never 0
	if ours {
		delete(sh.maps, e.start)
	}
	sh.mu.Unlock()
	if ours {
		t.unmapped(e.idx)
	}
}

// lookup returns the records of the mappings that start in [lo, hi), in slot order: those
// that follow each other from lo, then, past the first gap, those the containment lookup
// finds.
func (t *handleTable) lookup(lo, hi uint64, out []entry) []entry {
	for lo < hi {
		m, ok := t.at(lo)
		if !ok {
			out = t.find(func(a uint64, _ mapping) bool { return a >= lo && a < hi }, out)
			break
		}
		out = append(out, entry{start: lo, mapping: m})
		if lo+m.size < lo {
			break
		}
		lo += m.size
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Or(cmp.Compare(a.idx, b.idx), cmp.Compare(a.start, b.start)) })
	return out
}

// at returns the mapping that starts at a.
func (t *handleTable) at(a uint64) (mapping, bool) {
	sh := t.shard(a)
	sh.mu.Lock()
	m, ok := sh.maps[a]
	sh.mu.Unlock()
	return m, ok
}

// find is the containment lookup: every record that match accepts. It looks through all
// the records, shard by shard: only unmaps over a gap and retains inside a mapping need it.
func (t *handleTable) find(match func(start uint64, m mapping) bool, out []entry) []entry {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for a, m := range sh.maps {
			if match(a, m) {
				out = append(out, entry{start: a, mapping: m})
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// containing returns the record of the mapping that contains addr.
func (t *handleTable) containing(addr uint64) (entry, bool) {
	if m, ok := t.at(addr); ok {
		return entry{start: addr, mapping: m}, true
	}
	var buf [1]entry
	es := t.find(func(a uint64, m mapping) bool { return addr-a < m.size }, buf[:0])
	if len(es) == 0 {
		return entry{}, false
	}
	return es[0], true
}

// retainAt runs driverRetain (cuMemRetainAllocationHandle at addr) and records the
// reference it returns, holding the drop lock of the allocation mapped there when cu knows
// the mapping. When the table cannot record the reference it returns the driver's value
// with the error, for the caller to release.
func (t *handleTable) retainAt(addr uint64, driverRetain func() (uint64, error)) (MemHandle, uint64, error) {
	var s *slot
	e, known := t.containing(addr)
	for known {
		s = t.slot(e.idx)
		s.drop.Lock()
		if m, ok := t.at(e.start); ok && m == e.mapping {
			break // still mapped: no unmap of it is in the driver until the lock goes
		}
		s.drop.Unlock()
		s = nil
		e, known = t.containing(addr)
	}
	drv, err := driverRetain()
	var h MemHandle
	ok := false
	if s != nil {
		if err == nil {
			h, ok = s.ref(e.idx, drv)
		}
		s.drop.Unlock()
	}
	if err != nil || ok {
		return h, drv, err
	}
	// Not recorded, or not the allocation recorded there: a reference to another one.
	h, err = t.add(drv)
	return h, drv, err
}
