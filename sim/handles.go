package sim

import "github.com/cuvmm/cuvmm/cu"

// handle is one CUmemGenericAllocationHandle value: physical memory or a multicast object.
// The value is valid (callers may pass it) while refs > 0. An entry whose references are all
// released stays in the table, invisible, while mappings made through it remain, because
// cuMemRetainAllocationHandle on such a mapping returns the same value again.
type handle struct {
	value cu.MemHandle
	mem   *phys     // physical memory, or nil
	mc    *mcObject // multicast object, or nil
	refs  int
	maps  int
	// prop is what cuMemGetAllocationPropertiesFromHandle reports for this handle: an
	// imported handle reports no shareable handle types.
	prop cu.MemAllocationProp
}

// handleStride spaces handle values so that an off-by-one or a value from another table is
// never accidentally valid.
const handleStride = 0x10

// handleBase is the first handle value: values look like the driver's pointers, never
// small integers. The nth handle a Sim makes has the value handleBase + n*handleStride, so
// values never repeat within a Sim and a sequence of calls always gives the same ones.
const handleBase = 0x5000000000

// newHandle enters a handle of mem or mc in the table with the next value and one
// reference, and returns it. A new handle for memory takes one of its users, which the
// caller has accounted for.
func (s *Sim) newHandle(mem *phys, mc *mcObject, prop cu.MemAllocationProp) *handle {
	h := s.spareHandles.get()
	*h = handle{value: cu.MemHandle(handleBase + s.handleCount*handleStride), mem: mem, mc: mc, prop: prop, refs: 1}
	s.handleCount++
	s.handles[h.value] = h
	s.live++
	return h
}

// spares keeps up to maxSpares freed objects of one kind for reuse: creating and releasing
// memory is the commonest pair of calls after a map, and then allocates nothing, so that
// the garbage collector does not scan a Sim of many mappings over and over.
type spares[T any] []*T

const maxSpares = 64

func (sp *spares[T]) get() *T {
	if n := len(*sp); n > 0 {
		x := (*sp)[n-1]
		*sp = (*sp)[:n-1]
		return x
	}
	return new(T)
}

// put keeps x, which nothing refers to any more.
func (sp *spares[T]) put(x *T) {
	if len(*sp) < maxSpares {
		var zero T
		*x = zero
		*sp = append(*sp, x)
	}
}

// lookup returns the entry of a valid handle value, or nil.
func (s *Sim) lookup(v cu.MemHandle) *handle {
	if h := s.handles[v]; h != nil && h.refs > 0 {
		return h
	}
	return nil
}

// retain takes one more reference to h (cuMemRetainAllocationHandle).
func (s *Sim) retain(h *handle) {
	if h.refs == 0 {
		s.live++
	}
	h.refs++
	if h.mem != nil {
		h.mem.users++
	}
}

// release drops one reference to h.
func (s *Sim) release(h *handle) {
	if h.refs--; h.refs == 0 {
		s.live--
	}
	s.dropped(h)
}

// unmapped drops the mapping count of h after an unmap.
func (s *Sim) unmapped(h *handle) {
	h.maps--
	s.dropped(h)
}

// dropped follows the loss of a reference or mapping of h: it drops the user of h's memory
// that went with it, and removes an entry nothing refers to any more, freeing a multicast
// object with it.
func (s *Sim) dropped(h *handle) {
	if h.mem != nil {
		s.unuse(h.mem)
	}
	if h.refs > 0 || h.maps > 0 {
		return
	}
	delete(s.handles, h.value)
	if h.mc != nil {
		s.freeMulticast(h.mc)
	}
	s.spareHandles.put(h)
}

// unuse drops one user of p and frees it when none is left.
func (s *Sim) unuse(p *phys) {
	if p.users--; p.users > 0 {
		return
	}
	if p.counted {
		s.memOf(p.dev).committed -= p.size
	}
	if s.byFile[p.fileKey] == p {
		delete(s.byFile, p.fileKey)
	}
	if p.fabric != nil {
		delete(s.byFabric, *p.fabric)
	}
	if p.counted && (p.fileKey != (fileKey{}) || p.fabric != nil) { // memory this Sim created, and so exported
		unpublish(p.fileKey, p.token)
	}
	p.st.close()
	if !p.win32 {
		s.sparePhys.put(p)
	}
}

// tryUse takes one more user of m unless m is nil or already freed.
func tryUse(m *phys) *phys {
	if m == nil || m.users == 0 {
		return nil
	}
	m.users++
	return m
}
