package cu

import (
	"sync"
	"sync/atomic"
)

// The mapping index.
//
// The driver corrupts its heap when a cuMemUnmap that frees an allocation (its last mapping,
// with no handle reference left) runs at the same time as another unmap or release of that
// allocation: recorded on an H100 with driver 580, the C program bench/c/droprace.c kills
// the process with SIGSEGV or a glibc heap abort within seconds, while every other pair of
// concurrent drops it tries (two releases, a release and an unmap that is not the last, two
// unmaps that are not the last) runs clean. cuMemUnmap names an address range, not an
// allocation, so cu records each mapping it makes (start, size and the handle's slot) to
// know which allocations an unmap drops, and serializes the drops of each allocation on
// its slot's drop lock (handles.go). A call on one allocation still never waits for one on
// another.
//
// The index is sharded by start address; a shard's lock is held only to look up, add or
// take records, never across a driver call.

const mapShards = 64

type mapRecord struct {
	size uint64
	idx  uint32 // the slot of the handle the mapping was made through
}

type mapShard struct {
	mu   sync.Mutex
	recs map[uint64]mapRecord // by start address
	_    [64 - 8 - 8]byte
}

type mapIndex struct {
	shards [mapShards]mapShard
	// align is the largest power of two that divides every start recorded so far, and
	// largest the largest size: together they bound the starts an unmap of a range, or a
	// retain of an address, has to look up.
	align   atomic.Uint64
	largest atomic.Uint64
}

func (x *mapIndex) shard(start uint64) *mapShard {
	return &x.shards[((start>>21)*0x9e3779b97f4a7c15)>>58]
}

// add records a mapping of slot idx at [start, start+size).
func (x *mapIndex) add(start, size uint64, idx uint32) {
	sh := x.shard(start)
	sh.mu.Lock()
	if sh.recs == nil {
		sh.recs = map[uint64]mapRecord{}
	}
	sh.recs[start] = mapRecord{size, idx}
	sh.mu.Unlock()
	a := start & -start // the largest power of two dividing start
	for a != 0 {
		cur := x.align.Load()
		if cur != 0 && cur <= a || x.align.CompareAndSwap(cur, a) {
			break
		}
	}
	for {
		cur := x.largest.Load()
		if cur >= size || x.largest.CompareAndSwap(cur, size) {
			break
		}
	}
}

// taken is a mapping record taken out of the index by take.
type taken struct {
	start uint64
	mapRecord
}

// take removes and returns the records of the mappings starting in [start, start+size),
// appended to buf[:0]. An unmap takes them before the driver call and puts them back if it
// fails.
func (x *mapIndex) take(start, size uint64, buf []taken) []taken {
	out := buf[:0]
	end := start + size
	if end < start {
		end = ^uint64(0)
	}
	// The common case: the range is one mapping.
	sh := x.shard(start)
	sh.mu.Lock()
	if r, ok := sh.recs[start]; ok && r.size == size {
		delete(sh.recs, start)
		sh.mu.Unlock()
		return append(out, taken{start, r})
	}
	sh.mu.Unlock()
	align := x.align.Load()
	if align == 0 {
		return out // nothing was ever mapped
	}
	// Look up every start the range can hold, or, when the range holds more starts than
	// there are records, look at every record.
	if starts := (end - start + align - 1) / align; starts <= uint64(x.count()) {
		for a := (start + align - 1) &^ (align - 1); a < end && a >= start; a += align {
			sh := x.shard(a)
			sh.mu.Lock()
			if r, ok := sh.recs[a]; ok {
				delete(sh.recs, a)
				out = append(out, taken{a, r})
			}
			sh.mu.Unlock()
		}
		return out
	}
	for i := range x.shards {
		sh := &x.shards[i]
		sh.mu.Lock()
		for a, r := range sh.recs {
			if a >= start && a < end {
				delete(sh.recs, a)
				out = append(out, taken{a, r})
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// restore puts back what take took, for an unmap that failed.
func (x *mapIndex) restore(ts []taken) {
	for _, t := range ts {
		sh := x.shard(t.start)
		sh.mu.Lock()
		sh.recs[t.start] = t.mapRecord
		sh.mu.Unlock()
	}
}

// containing returns the slot of the recorded mapping that contains addr.
func (x *mapIndex) containing(addr uint64) (idx uint32, ok bool) {
	align, largest := x.align.Load(), x.largest.Load()
	if align == 0 {
		return 0, false
	}
	if largest/align > uint64(x.count()) {
		// Fewer records than starts to try: look at every record.
		for i := range x.shards {
			sh := &x.shards[i]
			sh.mu.Lock()
			for a, r := range sh.recs {
				if addr-a < r.size {
					sh.mu.Unlock()
					return r.idx, true
				}
			}
			sh.mu.Unlock()
		}
		return 0, false
	}
	// Mappings do not overlap: the nearest recorded start at or below addr decides.
	for a, tries := addr&^(align-1), largest/align+1; tries > 0; a, tries = a-align, tries-1 {
		sh := x.shard(a)
		sh.mu.Lock()
		r, found := sh.recs[a]
		sh.mu.Unlock()
		if found {
			return r.idx, addr-a < r.size
		}
		if a < align {
			break
		}
	}
	return 0, false
}

// count returns how many mappings are recorded.
func (x *mapIndex) count() int {
	n := 0
	for i := range x.shards {
		sh := &x.shards[i]
		sh.mu.Lock()
		n += len(sh.recs)
		sh.mu.Unlock()
	}
	return n
}

// lockDrops takes the drop locks of the slots of ts, each once, in slot order (so that two
// unmaps never wait for each other in a cycle): shared while the allocation still has a
// handle reference (then no unmap can free it, and the release that would waits), exclusive
// once it has none (then this unmap may be the one that frees it). It returns the slots it
// locked and how, for unlockDrops.
func (t *handleTable) lockDrops(ts []taken, buf []held) []held {
	hs := buf[:0]
	for _, r := range ts {
		dup := false
		for _, h := range hs {
			dup = dup || h.idx == r.idx
		}
		if !dup {
			hs = append(hs, held{idx: r.idx})
		}
	}
	// Insertion sort: an unmap spans few allocations.
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].idx < hs[j-1].idx; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
	for i := range hs {
		s := t.slot(hs[i].idx)
		s.drop.RLock()
		if s.refs > 0 {
			continue
		}
		s.drop.RUnlock()
		s.drop.Lock()
		hs[i].excl = true
	}
	return hs
}

// held is one drop lock lockDrops took.
type held struct {
	idx  uint32
	excl bool
}

func (t *handleTable) unlockDrops(hs []held) {
	for _, h := range hs {
		s := t.slot(h.idx)
		if h.excl {
			s.drop.Unlock()
		} else {
			s.drop.RUnlock()
		}
	}
}

// mapped records a mapping the driver just made of h's slot s, which the caller has pinned:
// recorded before the pin ends, the mapping is seen by the handle's last release, which
// waits for the pin.
func (t *handleTable) mapped(s *slot, h MemHandle, start, size uint64) {
	t.maps.add(start, size, uint32(h))
	s.maps.Add(1)
}

// unmap runs driverUnmap on [start, start+size) holding the drop locks of the allocations
// the range maps, and forgets the mappings if it succeeds.
func (t *handleTable) unmap(start, size uint64, driverUnmap func() error) error {
	var tbuf [4]taken
	var hbuf [4]held
	ts := t.maps.take(start, size, tbuf[:])
	hs := t.lockDrops(ts, hbuf[:])
	err := driverUnmap()
	if err != nil {
		t.maps.restore(ts)
	} else {
		for _, r := range ts {
			t.unmapped(r.idx)
		}
	}
	t.unlockDrops(hs)
	return err
}

// retainAt runs driverRetain (cuMemRetainAllocationHandle at addr) and records the reference
// it returns. A retain of a mapping whose handle was released revives the allocation, so
// it must not run alongside the unmap that would free it: it holds that allocation's drop
// lock when cu knows the mapping. When the table cannot record the reference it returns
// the driver's value with the error, for the caller to release.
func (t *handleTable) retainAt(addr uint64, driverRetain func() (uint64, error)) (MemHandle, uint64, error) {
	if idx, known := t.maps.containing(addr); known {
		s := t.slot(idx)
		s.drop.Lock()
		drv, err := driverRetain()
		var h MemHandle
		ok := false
		if err == nil {
			h, ok = s.ref(idx, drv)
		}
		s.drop.Unlock()
		if err != nil || ok {
			return h, drv, err
		}
		// The range was remapped meanwhile: the reference is to another allocation.
		h, err = t.add(drv)
		return h, drv, err
	}
	drv, err := driverRetain()
	if err != nil {
		return 0, 0, err
	}
	h, err := t.add(drv)
	return h, drv, err
}
