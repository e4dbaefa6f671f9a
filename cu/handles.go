package cu

import (
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/internal/guard"
)

// The handle table.
//
// The driver dereferences a CUmemGenericAllocationHandle it does not know and kills the
// process. So a MemHandle is not the driver's value: it names a slot (index and
// generation) that holds it. A call pins the slot with one atomic operation on the slot's
// guard, which fails for any generation but the open one, so a made-up or released handle
// returns ErrUnknownHandle without reaching the driver; the last release drains the pins
// before the driver frees the value.
//
// A slot lives while the process holds a reference to the allocation or a mapping of it (a
// retain through a mapping whose handle was released revives it under a new generation).
// Its drop lock serializes the drops of the allocation (mappings.go says why).
//
// Shards, picked by a hash of the driver value or of a mapping's start, hold Go maps from
// driver values to slots and from starts to mappings, and the free slots. Their locks are
// leaves, held only to read or change those: never across a driver call, nor while waiting
// for another lock. Drop locks are taken in slot order, and never waited for while
// pinning (a release holds its drop lock while it drains the pins).

const (
	pageShift = 8
	maxSlots  = 1 << 24 // live handles
	nShards   = 64
)

// slot is one allocation (or multicast object) the process holds.
type slot struct {
	g    guard.Guard   // the handle's calls in flight; open while refs > 0
	drv  atomic.Uint64 // the driver's value
	drop sync.Mutex    // held by releases, unmaps and retains through a mapping
	refs atomic.Int32  // references the process holds; changed under drop
	maps atomic.Int32  // mappings recorded
	_    [24]byte      // a cache line each: calls on different handles share no line
}

type page [1 << pageShift]slot

type shard struct {
	mu   sync.Mutex
	drvs map[uint64]uint32  // driver value -> slot index, of live slots
	maps map[uint64]mapping // start -> mapping
	free []uint32           // slots of freed allocations, to reuse
	seq  uint32             // records made (mapping.seq)
	_    [12]byte
}

type handleTable struct {
	pages  [maxSlots >> pageShift]atomic.Pointer[page]
	next   atomic.Uint32 // slots ever used: the next fresh index
	shards [nShards]shard
}

var handles handleTable

// handleOf makes the MemHandle of slot idx in generation gen, which is never 0.
func handleOf(idx, gen uint32) MemHandle { return MemHandle(uint64(gen)<<32 | uint64(idx)) }

// slotOf returns the slot h names and h's generation, or nil.
func (t *handleTable) slotOf(h MemHandle) (*slot, uint32) {
	idx, gen := uint32(h), uint32(h>>32)
	if idx >= maxSlots || gen == 0 {
		return nil, 0
	}
	p := t.pages[idx>>pageShift].Load()
	if p == nil {
		return nil, 0
	}
	return &p[idx&(1<<pageShift-1)], gen
}

func (t *handleTable) slot(idx uint32) *slot {
	return &t.pages[idx>>pageShift].Load()[idx&(1<<pageShift-1)]
}

// pin returns the slot of a live handle, pinned against its last release until unpin, and
// the driver's value; ErrUnknownHandle for any other value.
func (t *handleTable) pin(h MemHandle) (*slot, uint64, error) {
	s, gen := t.slotOf(h)
	if s == nil || !s.g.Enter(gen) {
		return nil, 0, ErrUnknownHandle
	}
	return s, s.drv.Load(), nil
}

func (s *slot) unpin() { s.g.Exit() }

func (t *handleTable) shard(key uint64) *shard {
	// Keys are addresses: mix the bits so that neighbours land in different shards.
	return &t.shards[(key*0x9e3779b97f4a7c15)>>58]
}

// add records one more reference to drv, which the driver just returned (create, import,
// retain), and returns its MemHandle: the one the process holds for drv, a new one for a
// released allocation still mapped, or a new slot's.
func (t *handleTable) add(drv uint64) (MemHandle, error) {
	sh := t.shard(drv)
	for {
		sh.mu.Lock()
		idx, ok := sh.drvs[drv]
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
		// Freed since the lookup, and forgotten: look again.
	}
}

// ref takes one more reference to slot idx if it still holds drv, reviving its handle under
// the next generation if every reference had been released; the caller holds s.drop.
func (s *slot) ref(idx uint32, drv uint64) (MemHandle, bool) {
	if s.drv.Load() != drv || s.refs.Load() == 0 && s.maps.Load() == 0 {
		return 0, false
	}
	if s.refs.Add(1) == 1 {
		s.g.Revive()
	}
	return handleOf(idx, s.g.Gen()), true
}

// open fills a free slot with drv; the caller holds sh.mu. A free slot is its opener's
// alone (no handle of its generation exists, no mapping counts it), so it is filled
// without its drop lock; refs is set before the guard opens, so that a release of the new
// generation, which the guard admits, finds its reference.
func (t *handleTable) open(sh *shard, drv uint64) (MemHandle, error) {
	var idx uint32
	if n := len(sh.free); n > 0 {
		idx, sh.free = sh.free[n-1], sh.free[:n-1]
	} else if idx = t.next.Add(1) - 1; idx >= maxSlots {
		t.next.Add(^uint32(0))
		return 0, errTooManyHandles
	} else if p := &t.pages[idx>>pageShift]; p.Load() == nil {
		pg := new(page)
		for i := range pg {
			pg[i].g.Retire() // generation 1, closed: the zero guard is open at 0
		}
		p.CompareAndSwap(nil, pg)
	}
	s := t.slot(idx)
	s.drv.Store(drv)
	s.refs.Store(1)
	gen := s.g.Revive()
	if sh.drvs == nil {
		sh.drvs = map[uint64]uint32{}
	}
	sh.drvs[drv] = idx
	return handleOf(idx, gen), nil
}

// release drops one reference to h. The last one waits for the calls in flight on h and
// refuses new ones before driverRelease frees the driver's value; if that fails, the
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
	drv, last := s.drv.Load(), s.refs.Load() == 1
	if last {
		s.g.Drain()
	}
	if err := driverRelease(drv); err != nil {
		if last {
			s.g.Reopen()
		}
		return err
	}
	if s.refs.Add(-1) == 0 {
		s.g.Retire()
		// The maps in flight have drained and unmaps wait for the drop lock: with no
		// mapping left, the driver has freed the allocation.
		if s.maps.Load() == 0 {
			t.forget(uint32(h), drv)
		}
	}
	return nil
}

// forget recycles the slot of an allocation the driver freed; the caller holds its drop
// lock.
func (t *handleTable) forget(idx uint32, drv uint64) {
	sh := t.shard(drv)
	sh.mu.Lock()
	delete(sh.drvs, drv) // idx's: until now an add of drv found idx, and waited for its lock
	sh.free = append(sh.free, idx)
	sh.mu.Unlock()
}

// known reports whether h is a live handle.
func (t *handleTable) known(h MemHandle) bool {
	s, gen := t.slotOf(h)
	return s != nil && s.g.Open() && s.g.Gen() == gen
}

// live counts the slots with references and their references. A create raises next before
// it adds the slot's page (and past maxSlots for a moment before it backs off).
func (t *handleTable) live() (n, refs int) {
	for i := range (min(t.next.Load(), maxSlots) + 1<<pageShift - 1) >> pageShift {
		p := t.pages[i].Load()
		if p == nil {
			continue
		}
		for j := range p {
			if r := p[j].refs.Load(); r > 0 {
				n, refs = n+1, refs+int(r)
			}
		}
	}
	return n, refs
}

// LiveHandles returns how many handles the process holds and the sum of their reference
// counts; tests use it to prove that nothing leaks.
func LiveHandles() (count, refs int) { return handles.live() }

// HandleKnown reports whether h is a live handle of this process.
func HandleKnown(h MemHandle) bool { return handles.known(h) }
