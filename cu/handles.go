package cu

import (
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/internal/guard"
)

// The handle table.
//
// The driver dereferences a CUmemGenericAllocationHandle it does not know and kills the
// process, so no value a caller makes up may reach it. A MemHandle that cu hands out is
// therefore not the driver's value: it names a slot of this table (index and generation),
// and the slot holds the driver's value. A call looks the slot up by index, pins it with
// one atomic operation on the slot's own state (guard.Guard), takes the driver's value
// from it and unpins it when the driver returns. A value cu never handed out, or one
// whose last reference was released, names no open slot of that generation, and the call
// fails with ErrUnknownHandle without reaching the driver.
//
// A slot lives as long as the driver keeps the allocation: while the process holds a
// reference to it or a mapping of it (cuMemRetainAllocationHandle on a mapping whose
// handle was released returns the same driver value, and revives the slot under a new
// MemHandle). Its drop lock serializes the calls that drop a reference to the allocation
// (mappings.go says why).
//
// Calls on different handles share no lock and no written memory: slots are a cache line
// each. A call on a handle waits only for that handle's release, which drains the calls
// pinning it before it lets the driver free the value. Creating, importing and retaining
// take a short lock of one of hashShards shards (never across a driver call) to find or
// fill a slot.

const (
	slotsPerPageShift = 8
	slotsPerPage      = 1 << slotsPerPageShift
	maxPages          = 1 << 16
	maxSlots          = maxPages * slotsPerPage // 16M live handles
	hashShards        = 64
)

// slot is one allocation (or multicast object) the process holds: the driver's value, the
// references and mappings of it, and the calls in flight on its handle.
type slot struct {
	g   guard.Guard   // the handle's calls in flight; open while refs > 0
	drv atomic.Uint64 // the driver's value, set before the slot opens
	// drop is taken exclusively by releases and by unmaps that may free the allocation,
	// shared by the other unmaps: the driver must never run a freeing unmap alongside
	// another drop of the same allocation. It is held across those driver calls, and only
	// this allocation's drops wait for it.
	drop sync.RWMutex
	refs int32        // references the process holds; written under drop held exclusively
	maps atomic.Int32 // mappings recorded in the mapping index
	// nextFree links the free slots of a shard (index + 1; 0 ends the list), under its lock:
	// the list lives in the slots, which create and release touch anyway.
	nextFree uint32
	_        [64 - 16 - 8 - 24 - 4 - 4 - 4]byte
}

type page [slotsPerPage]slot

// handleTable maps cu's handle values to the driver's.
type handleTable struct {
	pages  [maxPages]atomic.Pointer[page]
	next   atomic.Uint32 // slots ever used: the next fresh index
	grow   sync.Mutex    // allocates pages
	shards [hashShards]handleShard
	maps   mapIndex // the mappings made through the table's handles
}

// handleShard finds the slot of a driver value (a retain or import can return a value the
// process already holds) and recycles freed slots; a driver value belongs to the shard its
// hash picks.
type handleShard struct {
	mu   sync.Mutex
	drvs drvIndex // driver value -> slot index, for live slots
	free uint32   // the first free slot (index + 1; 0: none), linked through nextFree
	_    [64 - 8 - 32 - 4]byte
}

var handles handleTable

// handleOf makes the MemHandle of slot idx in generation gen. gen is never 0, so a
// MemHandle is never a small number, nor 0.
func handleOf(idx, gen uint32) MemHandle { return MemHandle(uint64(gen)<<32 | uint64(idx)) }

// slotOf returns the slot a handle value names, or nil if it names none (without checking
// the generation).
func (t *handleTable) slotOf(h MemHandle) (*slot, uint32) {
	idx, gen := uint32(h), uint32(h>>32)
	if idx >= maxSlots || gen == 0 {
		return nil, 0
	}
	p := t.pages[idx>>slotsPerPageShift].Load()
	if p == nil {
		return nil, 0
	}
	return &p[idx&(slotsPerPage-1)], gen
}

// pin returns the slot of a live handle, pinned against its release until unpin, and the
// driver's value; ErrUnknownHandle for any other value.
func (t *handleTable) pin(h MemHandle) (*slot, uint64, error) {
	s, gen := t.slotOf(h)
	if s == nil || !s.g.Enter(gen) {
		return nil, 0, ErrUnknownHandle
	}
	return s, s.drv.Load(), nil
}

func (s *slot) unpin() { s.g.Exit() }

func (t *handleTable) shard(drv uint64) *handleShard {
	// Driver values are addresses: mix the bits so neighbours land in different shards.
	return &t.shards[(drv*0x9e3779b97f4a7c15)>>58]
}

// add records one more reference to the driver's value drv, which the driver just
// returned (create, import, retain), and returns its MemHandle: the handle the process
// already holds for drv, a new handle for a slot whose handle was released while the
// allocation stayed mapped, or a new slot.
func (t *handleTable) add(drv uint64) (MemHandle, error) {
	sh := t.shard(drv)
	for {
		sh.mu.Lock()
		idx, ok := sh.drvs.find(drv)
		if !ok {
			h, err := t.open(sh, drv)
			sh.mu.Unlock()
			return h, err
		}
		sh.mu.Unlock()
		s := t.slot(idx)
		s.drop.Lock()
		h, ok := s.ref(idx, drv)
		s.drop.Unlock()
		if ok {
			return h, nil
		}
		// Freed meanwhile, and the shard forgot it: look again.
	}
}

// ref takes one more reference to slot idx if it still holds drv, reopening its handle
// under a new generation if every reference had been released; the caller holds s.drop
// exclusively.
func (s *slot) ref(idx uint32, drv uint64) (MemHandle, bool) {
	if s.drv.Load() != drv || s.refs == 0 && s.maps.Load() == 0 {
		return 0, false
	}
	if s.refs == 0 {
		s.g.Revive()
	}
	s.refs++
	return handleOf(idx, s.g.Gen()), true
}

// open fills a free slot with drv; the caller holds sh.mu.
func (t *handleTable) open(sh *handleShard, drv uint64) (MemHandle, error) {
	var idx uint32
	if sh.free != 0 {
		idx = sh.free - 1
		sh.free = t.slot(idx).nextFree
	} else {
		var err error
		if idx, err = t.fresh(); err != nil {
			return 0, err
		}
	}
	s := t.slot(idx)
	s.drop.Lock()
	s.drv.Store(drv)
	s.refs = 1
	gen := s.g.Revive()
	s.drop.Unlock()
	sh.drvs.put(drv, idx)
	return handleOf(idx, gen), nil
}

// fresh returns a slot index never used before, retired at generation 1.
func (t *handleTable) fresh() (uint32, error) {
	idx := t.next.Add(1) - 1
	if idx >= maxSlots {
		t.next.Add(^uint32(0))
		return 0, errTooManyHandles
	}
	pi := idx >> slotsPerPageShift
	if t.pages[pi].Load() == nil {
		t.grow.Lock()
		if t.pages[pi].Load() == nil {
			p := new(page)
			for i := range p {
				p[i].g.Retire() // generation 1, closed: a zero slot would be open at 0
			}
			t.pages[pi].Store(p)
		}
		t.grow.Unlock()
	}
	return idx, nil
}

func (t *handleTable) slot(idx uint32) *slot {
	return &t.pages[idx>>slotsPerPageShift].Load()[idx&(slotsPerPage-1)]
}

// release drops one reference to h. The last one waits for the calls in flight on h,
// refuses new ones, and lets driverRelease free the driver's value; if that fails the
// handle stays as it was.
func (t *handleTable) release(h MemHandle, driverRelease func(drv uint64) error) error {
	s, gen := t.slotOf(h)
	if s == nil {
		return ErrUnknownHandle
	}
	s.drop.Lock()
	defer s.drop.Unlock()
	if !s.g.Open() || s.g.Gen() != gen {
		return ErrUnknownHandle
	}
	drv := s.drv.Load()
	if s.refs > 1 {
		// Other references keep the driver's value valid: the calls in flight need not wait.
		if err := driverRelease(drv); err != nil {
			return err
		}
		s.refs--
		return nil
	}
	s.g.Drain()
	if err := driverRelease(drv); err != nil {
		s.g.Reopen()
		return err
	}
	s.refs = 0
	s.g.Retire()
	// The calls that record mappings have drained, and unmaps wait for the drop lock, so
	// maps is settled: with none left the driver has freed the allocation.
	if s.maps.Load() == 0 {
		t.forget(uint32(h), drv)
	}
	return nil
}

// unmapped counts one mapping of slot idx gone; the caller holds its drop lock (exclusively
// when the slot has no reference left, as lockDrops arranges). When that was the
// allocation's last mapping and reference, the driver has freed it: the caller forgets the
// slot (forget, with drv) once it has let go of every drop lock it holds.
func (t *handleTable) unmapped(idx uint32) (drv uint64, freed bool) {
	s := t.slot(idx)
	if s.maps.Add(-1) == 0 && s.refs == 0 {
		return s.drv.Load(), true
	}
	return 0, false
}

// forget recycles the slot of an allocation the driver freed.
func (t *handleTable) forget(idx uint32, drv uint64) {
	sh := t.shard(drv)
	sh.mu.Lock()
	sh.drvs.remove(drv, idx)
	t.slot(idx).nextFree = sh.free
	sh.free = idx + 1
	sh.mu.Unlock()
}

// known reports whether h is a live handle.
func (t *handleTable) known(h MemHandle) bool {
	s, gen := t.slotOf(h)
	return s != nil && s.g.Open() && s.g.Gen() == gen
}

// live counts the open slots and their references. fresh raises next before it adds the
// slot's page (and above maxSlots for a moment before it backs off): slots without a page
// are not in use yet.
func (t *handleTable) live() (n, refs int) {
	for idx := range min(t.next.Load(), maxSlots) {
		pg := t.pages[idx>>slotsPerPageShift].Load()
		if pg == nil {
			continue
		}
		s := &pg[idx&(slotsPerPage-1)]
		s.drop.RLock()
		if s.refs > 0 {
			n++
			refs += int(s.refs)
		}
		s.drop.RUnlock()
	}
	return n, refs
}

// LiveHandles returns how many handles the process holds and the sum of their reference
// counts; tests use it to prove that nothing leaks.
func LiveHandles() (count, refs int) { return handles.live() }

// HandleKnown reports whether h is a live handle of this process.
func HandleKnown(h MemHandle) bool { return handles.known(h) }
