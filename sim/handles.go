package sim

import (
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
)

// handle is one CUmemGenericAllocationHandle value: physical memory or a multicast object.
// The value is valid (callers may pass it) while refs > 0. An entry whose references are all
// released stays in the table, invisible, while mappings made through it remain, because
// cuMemRetainAllocationHandle on such a mapping returns the same value again. refs and maps
// are guarded by the lock of the handle's shard.
type handle struct {
	value cu.MemHandle
	mem   *phys     // physical memory, or nil
	mc    *mcObject // multicast object, or nil
	refs  int
	maps  int
	// prop is what cuMemGetAllocationPropertiesFromHandle reports for this handle: an
	// imported handle reports no shareable handle types.
	prop cu.MemAllocationProp
	obj  *memObject // what to recycle once forgotten, for a handle made by Create
}

// memObject is a handle and the memory Create made with it, allocated together and reused
// once both are gone, the handle forgotten and the memory freed, in either order (memory
// outlives its handle while mapped or imported again): creating and releasing memory is
// the commonest pair of calls after a map, and then costs the garbage collector nothing.
type memObject struct {
	handle
	phys
	alive atomic.Int32 // how many of the two are not gone yet
}

var memObjects = sync.Pool{New: func() any { return new(memObject) }}

func newMemObject() *memObject {
	o := memObjects.Get().(*memObject)
	o.handle.obj, o.phys.obj = o, o
	o.alive.Store(2)
	return o
}

// gone marks the handle or the memory of o gone; the second reuses o.
func (o *memObject) gone() {
	if o.alive.Add(-1) == 0 {
		*o = memObject{}
		memObjects.Put(o)
	}
}

// handleShards is how many independently locked parts the handle table has: calls on
// handles of different shards never wait for each other.
const handleShards = 64

// handleShard is one part of the handle table. A handle's shard is fixed by its value, and
// a new handle goes to the shard of the goroutine that makes it (stripe), so that
// goroutines on different cores making and releasing their own handles rarely share one.
type handleShard struct {
	mu   sync.Mutex
	m    map[cu.MemHandle]*handle
	live int // its handles with references
	// next is the next handle number to hand out, from the shard's block; a multiple of
	// handleBlock when the block is used up (and at first).
	next  uint64
	calls [numShardOps]uint64
	// Shards 128 bytes apart: a core's adjacent-line prefetch fetches lines in pairs.
	_ [128 - 8 - 8 - 8 - 8 - 8*numShardOps]byte
}

// The calls a handle shard counts itself, under its lock.
const (
	shardCreate = iota
	shardRelease
	numShardOps
)

var shardOps = [numShardOps]Op{OpCreate, OpRelease}

// handleStride spaces handle values so that an off-by-one or a value from another table is
// never accidentally valid. Values never repeat within a Sim.
const handleStride = 0x10

// handleBase is the first handle value: values look like the driver's pointers, never
// small integers. It is a multiple of handleStride*handleShards, so that a value's shard
// is (value/handleStride) % handleShards.
const handleBase = 0x5000000000

// handleBlock is how many handle numbers a shard takes from the Sim's count at once: one
// shared write per handleBlock handles made on a shard.
const handleBlock = 64

func (s *Sim) shardOf(v cu.MemHandle) *handleShard { return &s.handles[shardIndex(v)] }

func shardIndex(v cu.MemHandle) uint64 { return (uint64(v) / handleStride) % handleShards }

// newHandle makes a handle with one reference. A new handle for memory takes one of its
// users, which the caller has accounted for.
func (s *Sim) newHandle(mem *phys, mc *mcObject, prop cu.MemAllocationProp) *handle {
	h := &handle{mem: mem, mc: mc, prop: prop}
	s.addHandle(h, -1)
	return h
}

// addHandle gives h its value and one reference, and enters it in the table; count names
// the shard-counted call it completes (shardCreate), or is -1. A value is its shard's index
// and a number from the shard's block; blocks are numbered in the order shards take them,
// so values never repeat and grow with the number of handles the Sim has made (by at most
// a block per shard more).
func (s *Sim) addHandle(h *handle, count int) {
	i := stripe() % handleShards
	sh := &s.handles[i]
	sh.mu.Lock()
	if sh.next%handleBlock == 0 {
		sh.next = (s.nextBlock.Add(1) - 1) * handleBlock
	}
	v := cu.MemHandle(handleBase + (sh.next*handleShards+i)*handleStride)
	sh.next++
	h.value, h.refs = v, 1
	sh.m[v] = h
	sh.live++
	if h.mc != nil {
		h.mc.sh = sh
	}
	if count >= 0 {
		sh.calls[count]++
	}
	sh.mu.Unlock()
}

// lookup returns the entry of a valid handle value, or nil; the caller holds sh.mu.
func (sh *handleShard) lookup(v cu.MemHandle) *handle {
	h := sh.m[v]
	if h == nil || h.refs == 0 {
		return nil
	}
	return h
}

// retain takes one more reference to h (cuMemRetainAllocationHandle); the caller holds
// its shard's lock.
func (sh *handleShard) retain(h *handle) {
	if h.refs == 0 {
		sh.live++
	}
	h.refs++
	if h.mem != nil {
		h.mem.use()
	}
}

// release drops one reference to h; the caller holds its shard's lock.
func (s *Sim) release(sh *handleShard, h *handle) {
	h.refs--
	if h.refs == 0 {
		sh.live--
	}
	if h.mem != nil {
		s.unuse(h.mem)
	}
	s.maybeForget(sh, h)
}

// unmapped drops the mapping count of h after an unmap; the caller holds its shard's lock.
func (s *Sim) unmapped(sh *handleShard, h *handle) {
	h.maps--
	if h.mem != nil {
		s.unuse(h.mem)
	}
	s.maybeForget(sh, h)
}

// maybeForget removes an entry nothing refers to any more, freeing a multicast object with
// it.
func (s *Sim) maybeForget(sh *handleShard, h *handle) {
	if h.refs > 0 || h.maps > 0 {
		return
	}
	delete(sh.m, h.value)
	if h.mc != nil {
		s.freeMulticast(h.mc)
	}
	if h.obj != nil {
		h.obj.gone()
	}
}

// unuse drops one user of p and frees it when none is left. It may run under any lock but
// shareMu and a store's own, which it takes.
func (s *Sim) unuse(p *phys) {
	if !p.drop() {
		return
	}
	if p.counted {
		s.memOf(p.dev).uncommit(p.size)
	}
	if p.fileKey != (fileKey{}) || p.fabric != nil {
		s.shareMu.Lock()
		if s.byFile[p.fileKey] == p {
			delete(s.byFile, p.fileKey)
		}
		if p.fabric != nil {
			delete(s.byFabric, *p.fabric)
		}
		s.shareMu.Unlock()
		if p.counted { // memory this Sim created, and so exported
			unpublish(p.fileKey, p.token)
		}
	}
	p.close()
	if p.obj != nil {
		p.obj.gone()
	}
}
