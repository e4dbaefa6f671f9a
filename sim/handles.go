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
// never accidentally valid. Values never repeat within a Sim.
const handleStride = 0x10

func (s *Sim) newHandle(mem *phys, mc *mcObject, prop cu.MemAllocationProp) *handle {
	s.nextHandle += handleStride
	h := &handle{value: cu.MemHandle(s.nextHandle), mem: mem, mc: mc, refs: 1, prop: prop}
	s.handles[h.value] = h
	s.liveHandles++
	if mem != nil {
		mem.users++
	}
	return h
}

// lookup returns the entry of a valid handle value, or nil.
func (s *Sim) lookup(v cu.MemHandle) *handle {
	h := s.handles[v]
	if h == nil || h.refs == 0 {
		return nil
	}
	return h
}

// retain takes one more reference to h (cuMemRetainAllocationHandle).
func (s *Sim) retain(h *handle) {
	if h.refs == 0 {
		s.liveHandles++
	}
	h.refs++
	if h.mem != nil {
		h.mem.users++
	}
}

// release drops one reference to h.
func (s *Sim) release(h *handle) {
	h.refs--
	if h.refs == 0 {
		s.liveHandles--
	}
	if h.mem != nil {
		s.unuse(h.mem)
	}
	s.maybeForget(h)
}

// maybeForget removes an entry nothing refers to any more, freeing a multicast object with
// it.
func (s *Sim) maybeForget(h *handle) {
	if h.refs > 0 || h.maps > 0 {
		return
	}
	delete(s.handles, h.value)
	if h.mc != nil {
		s.freeMulticast(h.mc)
	}
}

// unuse drops one user of p and frees it when none is left.
func (s *Sim) unuse(p *phys) {
	p.users--
	if p.users > 0 {
		return
	}
	s.allocs--
	if p.counted {
		if p.dev >= 0 {
			s.committed[p.dev] -= p.size
		} else {
			s.hostCommitted -= p.size
		}
	}
	if p.fileKey != (fileKey{}) {
		delete(s.byFile, p.fileKey)
	}
	if p.fabric != nil {
		delete(s.byFabric, *p.fabric)
	}
	if p.st != nil {
		p.st.close()
	}
}
