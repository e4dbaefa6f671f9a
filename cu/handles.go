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

// slot is one handle: the driver's value, its references and the calls in flight on it.
type slot struct {
	g   guard.Guard
	drv atomic.Uint64 // the driver's value, set before the slot opens
	// mu serializes changes to refs and the release of the driver's value; it is held
	// across cuMemRelease, but only this handle's calls (and none once drained) need it.
	mu   sync.Mutex
	refs int32 // references this process holds (create, import, retain: one each)
	_    [64 - 8 - 8 - 8 - 8 - 4]byte
}

type page [slotsPerPage]slot

// handleTable maps cu's handle values to the driver's.
type handleTable struct {
	pages  [maxPages]atomic.Pointer[page]
	next   atomic.Uint32 // slots ever used: the next fresh index
	grow   sync.Mutex    // allocates pages
	shards [hashShards]handleShard
}

// handleShard finds the slot of a driver value (a retain or import can return a value the
// process already holds) and recycles released slots; a driver value belongs to the shard
// its hash picks.
type handleShard struct {
	mu   sync.Mutex
	byDr map[uint64]uint32 // driver value -> slot index, for open slots
	free []uint32
	_    [64 - 8 - 8 - 24]byte
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

// pin2 is pin for calls that take two handles.
func (t *handleTable) pin2(a, b MemHandle) (sa, sb *slot, da, db uint64, err error) {
	if sa, da, err = t.pin(a); err != nil {
		return nil, nil, 0, 0, err
	}
	if sb, db, err = t.pin(b); err != nil {
		sa.unpin()
		return nil, nil, 0, 0, err
	}
	return sa, sb, da, db, nil
}

func (s *slot) unpin() { s.g.Exit() }

func (t *handleTable) shard(drv uint64) *handleShard {
	// Driver values are addresses: mix the bits so neighbours land in different shards.
	return &t.shards[(drv*0x9e3779b97f4a7c15)>>58]
}

// add records one more reference to the driver's value drv, which the driver just
// returned (create, import, retain), and returns its MemHandle: the handle the process
// already holds for drv, or a new one.
func (t *handleTable) add(drv uint64) (MemHandle, error) {
	sh := t.shard(drv)
	for {
		sh.mu.Lock()
		idx, ok := sh.byDr[drv]
		if !ok {
			h, err := t.open(sh, drv)
			sh.mu.Unlock()
			return h, err
		}
		sh.mu.Unlock()
		s := t.slot(idx)
		s.mu.Lock()
		if s.g.Open() && s.drv.Load() == drv {
			s.refs++
			gen := s.g.Gen()
			s.mu.Unlock()
			return handleOf(idx, gen), nil
		}
		// Its last reference was released meanwhile, and the shard forgot it: look again.
		s.mu.Unlock()
	}
}

// open fills a free slot with drv; the caller holds sh.mu.
func (t *handleTable) open(sh *handleShard, drv uint64) (MemHandle, error) {
	var idx uint32
	if n := len(sh.free); n > 0 {
		idx, sh.free = sh.free[n-1], sh.free[:n-1]
	} else {
		var err error
		if idx, err = t.fresh(); err != nil {
			return 0, err
		}
	}
	s := t.slot(idx)
	s.mu.Lock()
	s.drv.Store(drv)
	s.refs = 1
	gen := s.g.Revive()
	s.mu.Unlock()
	if sh.byDr == nil {
		sh.byDr = map[uint64]uint32{}
	}
	sh.byDr[drv] = idx
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
	s.mu.Lock()
	defer s.mu.Unlock()
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
	sh := t.shard(drv)
	sh.mu.Lock()
	idx := uint32(h)
	if sh.byDr[drv] == idx {
		delete(sh.byDr, drv)
	}
	sh.free = append(sh.free, idx)
	sh.mu.Unlock()
	return nil
}

// known reports whether h is a live handle.
func (t *handleTable) known(h MemHandle) bool {
	s, gen := t.slotOf(h)
	return s != nil && s.g.Open() && s.g.Gen() == gen
}

// live counts the open slots and their references.
func (t *handleTable) live() (n, refs int) {
	for idx := range t.next.Load() {
		s := t.slot(idx)
		s.mu.Lock()
		if s.g.Open() {
			n++
			refs += int(s.refs)
		}
		s.mu.Unlock()
	}
	return n, refs
}

// LiveHandles returns how many handles the process holds and the sum of their reference
// counts; tests use it to prove that nothing leaks.
func LiveHandles() (count, refs int) { return handles.live() }

// HandleKnown reports whether h is a live handle of this process.
func HandleKnown(h MemHandle) bool { return handles.known(h) }
