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
// Mappings whose start is a multiple of 2 MiB (a mapping starts on a multiple of its
// allocation's granularity, 2 MiB on the recorded H100 and H200) are recorded in a
// two-level radix table over the
// address space, one atomic word per 2 MiB, read and written without a lock: a map stores
// one word, an unmap swaps it out. Others (host memory of a smaller granularity, addresses
// above the table) go to a sharded hash map whose locks are held only to look up, add or
// take a record, never across a driver call.

const (
	radixShift   = 21 // 2 MiB
	radixLeafLog = 14
	radixTopLog  = 48 - radixShift - radixLeafLog // the table covers addresses below 2^48
	mapShards    = 64
)

// A radix entry is 0 or (slot index + 1) | size in 2 MiB units << 32.
type radixLeaf [1 << radixLeafLog]atomic.Uint64

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
	radix  [1 << radixTopLog]atomic.Pointer[radixLeaf]
	grow   sync.Mutex
	shards [mapShards]mapShard
	// largest is the largest mapping recorded so far: how far below an address a retain
	// looks for the mapping that contains it.
	largest atomic.Uint64
	nhashed atomic.Int64 // records in the shards
}

// radixSlot returns the radix word of start, allocating its leaf if make is set; nil when
// start is not 2 MiB aligned, is above the table, or has no leaf.
func (x *mapIndex) radixSlot(start uint64, make bool) *atomic.Uint64 {
	if start&(1<<radixShift-1) != 0 || start>>48 != 0 {
		return nil
	}
	g := start >> radixShift
	top := &x.radix[g>>radixLeafLog]
	leaf := top.Load()
	if leaf == nil {
		if !make {
			return nil
		}
		x.grow.Lock()
		if leaf = top.Load(); leaf == nil {
			leaf = new(radixLeaf)
			top.Store(leaf)
		}
		x.grow.Unlock()
	}
	return &leaf[g&(1<<radixLeafLog-1)]
}

func radixWord(size uint64, idx uint32) (uint64, bool) {
	units := size >> radixShift
	if size&(1<<radixShift-1) != 0 || units == 0 || units>>32 != 0 {
		return 0, false
	}
	return units<<32 | uint64(idx) + 1, true
}

func radixRecord(w uint64) mapRecord {
	return mapRecord{size: (w >> 32) << radixShift, idx: uint32(w) - 1}
}

func (x *mapIndex) shard(start uint64) *mapShard {
	return &x.shards[((start>>21)*0x9e3779b97f4a7c15)>>58]
}

// add records a mapping of slot idx at [start, start+size) and returns the slot of a stale
// record it replaced (a mapping cu did not see go, from a map and an unmap of one range
// racing), if any.
func (x *mapIndex) add(start, size uint64, idx uint32) (stale uint32, hadStale bool) {
	x.noteSize(size)
	return x.put(nil, start, size, idx)
}

// noteSize raises largest to size.
func (x *mapIndex) noteSize(size uint64) {
	for cur := x.largest.Load(); size > cur; cur = x.largest.Load() {
		if x.largest.CompareAndSwap(cur, size) {
			return
		}
	}
}

// put is add without noteSize; word is start's radix word when the caller has looked it up
// (radixWordOf), nil to look it up here.
func (x *mapIndex) put(word *atomic.Uint64, start, size uint64, idx uint32) (stale uint32, hadStale bool) {
	if w, ok := radixWord(size, idx); ok {
		if word == nil {
			word = x.radixSlot(start, true)
		}
		if word != nil {
			if old := word.Swap(w); old != 0 {
				return radixRecord(old).idx, true
			}
			return 0, false
		}
	}
	sh := x.shard(start)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.recs == nil {
		sh.recs = map[uint64]mapRecord{}
	}
	old, hadStale := sh.recs[start]
	sh.recs[start] = mapRecord{size, idx}
	if !hadStale {
		x.nhashed.Add(1)
	}
	return old.idx, hadStale
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
	if p := x.radixSlot(start, false); p != nil {
		if w := p.Load(); w != 0 && radixRecord(w).size == size && p.CompareAndSwap(w, 0) {
			return append(out, taken{start, radixRecord(w)})
		}
	}
	// Every 2 MiB start of the range in the table, then the records outside it.
	for a := (start + 1<<radixShift - 1) &^ (1<<radixShift - 1); a < end && a >= start && a>>48 == 0; a += 1 << radixShift {
		if p := x.radixSlot(a, false); p != nil {
			if w := p.Swap(0); w != 0 {
				out = append(out, taken{a, radixRecord(w)})
			}
		} else {
			a |= 1<<(radixShift+radixLeafLog) - 1<<radixShift // no leaf: skip it
		}
	}
	if x.hashed() == 0 {
		return out
	}
	for i := range x.shards {
		sh := &x.shards[i]
		sh.mu.Lock()
		for a, r := range sh.recs {
			if a >= start && a < end {
				delete(sh.recs, a)
				x.nhashed.Add(-1)
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
		x.add(t.start, t.size, t.idx)
	}
}

// containing returns the slot of the recorded mapping that contains addr.
func (x *mapIndex) containing(addr uint64) (idx uint32, ok bool) {
	largest := x.largest.Load()
	if largest == 0 {
		return 0, false
	}
	// Mappings do not overlap: of the radix records, the nearest start at or below addr
	// decides. One that ends before addr leaves the hashed records, which may start
	// between it and addr.
	a := addr &^ (1<<radixShift - 1)
	for tries := largest>>radixShift + 1; tries > 0 && a>>48 == 0; tries-- {
		if p := x.radixSlot(a, false); p != nil {
			if w := p.Load(); w != 0 {
				if r := radixRecord(w); addr-a < r.size {
					return r.idx, true
				}
				break
			}
		}
		if a < 1<<radixShift {
			break
		}
		a -= 1 << radixShift
	}
	if x.hashed() == 0 {
		return 0, false
	}
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

// hashed returns how many mappings are recorded outside the radix table.
func (x *mapIndex) hashed() int { return int(x.nhashed.Load()) }

// count returns how many mappings are recorded (for tests: it walks the table).
func (x *mapIndex) count() int {
	n := x.hashed()
	for i := range x.radix {
		if leaf := x.radix[i].Load(); leaf != nil {
			for j := range leaf {
				if leaf[j].Load() != 0 {
					n++
				}
			}
		}
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

// mapping is a map in flight: MemMap pins the handle, counts the mapping on its slot and
// looks up the record's radix word before the driver call, and endMap records the
// mapping (or uncounts it) and unpins after. Counting before the call is safe: while s is
// pinned its release waits, so no drop can find the count at zero with no reference left.
type mapping struct {
	s           *slot
	word        *atomic.Uint64 // start's radix word (radixWordOf); nil: put finds the place
	start, size uint64
	idx         uint32
	grow        bool // size is above largest
}

// radixWordOf returns the radix word of a mapping of size bytes at start if the mapping
// is one the radix table records and start's leaf exists, nil otherwise; a leaf is made
// only for a mapping the driver has made (put). It is inlinable, for MemMap.
func (x *mapIndex) radixWordOf(start, size uint64) *atomic.Uint64 {
	if (start|size)&(1<<radixShift-1) != 0 || start>>48 != 0 || size == 0 || size>>(radixShift+32) != 0 {
		return nil
	}
	if leaf := x.radix[start>>(radixShift+radixLeafLog)].Load(); leaf != nil {
		return &leaf[(start>>radixShift)&(1<<radixLeafLog-1)]
	}
	return nil
}

// endMap records the mapping if the driver made it, and unpins the handle: recorded before
// the pin ends, the mapping is seen by the handle's last release, which waits for the pin.
func (t *handleTable) endMap(m *mapping, made bool) {
	if !made {
		m.s.maps.Add(-1)
		m.s.unpin()
		return
	}
	if m.grow {
		t.maps.noteSize(m.size)
	}
	stale, ok := t.maps.put(m.word, m.start, m.size, m.idx)
	// Unpinned before another drop lock is taken: the stale record may be this very
	// handle's, whose last release holds that lock while it waits for the pin.
	m.s.unpin()
	if ok {
		// A record of a mapping the driver no longer has (an unmap that raced the map of the
		// same range): count it gone, as its unmap would have.
		o := t.slot(stale)
		o.drop.Lock()
		drv, freed := t.unmapped(stale)
		o.drop.Unlock()
		if freed {
			t.forget(stale, drv)
		}
	}
}

// unmap runs driverUnmap on [start, start+size) holding the drop locks of the allocations
// the range maps, and forgets the mappings if it succeeds.
func (t *handleTable) unmap(start, size uint64, driverUnmap func() error) error {
	var tbuf [4]taken
	var hbuf [4]held
	var fbuf [4]freedSlot
	ts := t.maps.take(start, size, tbuf[:])
	hs := t.lockDrops(ts, hbuf[:])
	err := driverUnmap()
	freed := fbuf[:0]
	if err != nil {
		t.maps.restore(ts)
	} else {
		for _, r := range ts {
			if drv, ok := t.unmapped(r.idx); ok {
				freed = append(freed, freedSlot{r.idx, drv})
			}
		}
	}
	t.unlockDrops(hs)
	// Forgotten only now: a create in the same shard holds the shard's lock while it waits
	// for the drop lock of a slot forgotten a moment before, which this unmap may hold.
	for _, f := range freed {
		t.forget(f.idx, f.drv)
	}
	return err
}

// freedSlot is a slot whose allocation the driver freed, to forget.
type freedSlot struct {
	idx uint32
	drv uint64
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
