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

// mapping is a recorded mapping.
type mapping struct {
	size uint64
	idx  uint32 // the slot of the handle it was made through
}

// taken is a mapping an unmap took out of the records, and how the unmap holds its slot's
// drop lock (on the first record of each slot).
type taken struct {
	start uint64
	mapping
	lock uint8
}

const (
	lockedShared = 1 + iota
	lockedExclusive
)

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
	stale, had := sh.maps[start]
	sh.maps[start] = mapping{size, uint32(h)}
	sh.mu.Unlock()
	// Unpinned before another drop lock is waited for: the stale record may be this
	// handle's own, whose last release holds that lock while it drains the pins.
	s.unpin()
	if had {
		// A mapping the driver no longer has (an unmap raced the map of this range): count
		// it gone, as its unmap would have.
		o := t.slot(stale.idx)
		o.drop.Lock()
		t.unmapped(stale.idx)
		o.drop.Unlock()
	}
}

// unmapped counts one mapping of slot idx gone, and forgets the slot if the driver freed
// its allocation; the caller holds the drop lock (exclusively when the slot has no
// reference left).
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
	var buf [4]taken
	ts := t.take(start, end, buf[:0])
	// Each slot's lock once, in slot order, so that two unmaps never wait for each other in
	// a cycle: shared while the allocation has a reference (no unmap can free it, and the
	// release that could waits), exclusive once it has none (this unmap may free it).
	slices.SortFunc(ts, func(a, b taken) int { return cmp.Compare(a.idx, b.idx) })
	for i := range ts {
		if i > 0 && ts[i-1].idx == ts[i].idx {
			continue
		}
		s := t.slot(ts[i].idx)
		s.drop.RLock()
		ts[i].lock = lockedShared
		if s.refs.Load() == 0 {
			s.drop.RUnlock()
			s.drop.Lock()
			ts[i].lock = lockedExclusive
		}
	}
	err := driverUnmap()
	for _, r := range ts {
		if err != nil {
			t.put(r.start, r.mapping)
		} else {
			t.unmapped(r.idx)
		}
	}
	for _, r := range ts {
		switch r.lock {
		case lockedShared:
			t.slot(r.idx).drop.RUnlock()
		case lockedExclusive:
			t.slot(r.idx).drop.Unlock()
		}
	}
	return err
}

// take removes and returns the mappings that start in [lo, hi): those that follow each
// other from lo, then, past the first gap, those the containment lookup finds.
func (t *handleTable) take(lo, hi uint64, out []taken) []taken {
	for lo < hi {
		m, ok := t.at(lo, true)
		if !ok {
			return t.find(func(a uint64, _ mapping) bool { return a >= lo && a < hi }, true, out)
		}
		out = append(out, taken{start: lo, mapping: m})
		if lo+m.size < lo {
			break
		}
		lo += m.size
	}
	return out
}

// at returns the mapping that starts at a, removed from the records if take is set.
func (t *handleTable) at(a uint64, take bool) (mapping, bool) {
	sh := t.shard(a)
	sh.mu.Lock()
	m, ok := sh.maps[a]
	if ok && take {
		delete(sh.maps, a)
	}
	sh.mu.Unlock()
	return m, ok
}

// put records a mapping again, for an unmap that failed.
func (t *handleTable) put(a uint64, m mapping) {
	sh := t.shard(a)
	sh.mu.Lock()
	sh.maps[a] = m // not nil: the mapping was taken from it
	sh.mu.Unlock()
}

// find is the containment lookup: every record that match accepts, removed if take is set.
// It looks through all the records, shard by shard: only unmaps over a gap and retains
// inside a mapping need it.
func (t *handleTable) find(match func(start uint64, m mapping) bool, take bool, out []taken) []taken {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for a, m := range sh.maps {
			if match(a, m) {
				out = append(out, taken{start: a, mapping: m})
				if take {
					delete(sh.maps, a)
				}
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// containing returns the slot of the recorded mapping that contains addr.
func (t *handleTable) containing(addr uint64) (uint32, bool) {
	if m, ok := t.at(addr, false); ok {
		return m.idx, true
	}
	var buf [1]taken
	ts := t.find(func(a uint64, m mapping) bool { return addr-a < m.size }, false, buf[:0])
	if len(ts) == 0 {
		return 0, false
	}
	return ts[0].idx, true
}

// retainAt runs driverRetain (cuMemRetainAllocationHandle at addr) and records the
// reference it returns, holding the drop lock of the allocation mapped there when cu knows
// the mapping. When the table cannot record the reference it returns the driver's value
// with the error, for the caller to release.
func (t *handleTable) retainAt(addr uint64, driverRetain func() (uint64, error)) (MemHandle, uint64, error) {
	idx, known := t.containing(addr)
	var s *slot
	if known {
		s = t.slot(idx)
		s.drop.Lock()
	}
	drv, err := driverRetain()
	var h MemHandle
	ok := false
	if s != nil {
		if err == nil {
			h, ok = s.ref(idx, drv)
		}
		s.drop.Unlock()
	}
	if err != nil || ok {
		return h, drv, err
	}
	// Not recorded, or remapped meanwhile: a reference to another allocation.
	h, err = t.add(drv)
	return h, drv, err
}
