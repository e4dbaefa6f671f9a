package sim

import "slices"

// Stats is a snapshot of what a Sim holds, so a test can prove that code under test leaks
// nothing: after cleanup, Clean reports true. It is exact, but for memory that only a copy
// in progress still holds, which it does not count.
type Stats struct {
	// Handles is the number of valid handle values (memory and multicast) with at least one
	// reference; HandleRefs the sum of their references.
	Handles, HandleRefs int
	// Allocations is the number of live physical allocations, including released ones that
	// are still mapped or bound.
	Allocations int
	// Multicast is the number of live multicast objects.
	Multicast int
	// Reservations, Mappings and Bindings count live address reservations, mappings and
	// multicast bindings.
	Reservations, Mappings, Bindings int
	// Committed is the physical memory allocated on each device, in bytes; Host the memory
	// allocated on the host (MEM_LOCATION_TYPE_HOST and HOST_NUMA).
	Committed []uint64
	Host      uint64
	// Resident is the host memory actually holding simulated bytes (pages written).
	Resident uint64
	// Calls counts the calls of each operation (vmm.Backend method names), failed ones too.
	Calls map[string]uint64
}

// Clean reports whether nothing is allocated, reserved, mapped or bound.
func (st Stats) Clean() bool {
	return st.Handles == 0 && st.Allocations == 0 && st.Multicast == 0 && st.Reservations == 0 &&
		st.Mappings == 0 && st.Bindings == 0 && st.Host == 0 &&
		!slices.ContainsFunc(st.Committed, func(c uint64) bool { return c != 0 })
}

// Stats returns the current counters.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Handles:      s.live,
		Multicast:    s.mcs,
		Reservations: s.va.resvs.Len(),
		Mappings:     s.va.maps.Len(),
		Bindings:     s.bindings,
		Committed:    make([]uint64, len(s.devMem)),
		Host:         s.hostMem.committed,
		Calls:        make(map[string]uint64, numOps),
	}
	for i := range s.devMem {
		st.Committed[i] = s.devMem[i].committed
	}
	// Live memory is reachable from a handle entry (entries stay while mapped) or from a
	// multicast binding.
	seen := map[*phys]bool{}
	count := func(p *phys) {
		if !seen[p] {
			seen[p] = true
			st.Allocations++
			st.Resident += p.st.resident()
		}
	}
	for _, h := range s.handles {
		st.HandleRefs += h.refs
		if h.mem != nil {
			count(h.mem)
		}
		if h.mc != nil {
			for _, b := range h.mc.binds {
				count(b.mem)
			}
		}
	}
	for i, n := range s.calls {
		if n > 0 {
			st.Calls[opNames[i]] = n
		}
	}
	return st
}

// LiveHandles returns the number of valid handle values, for vmmtest.LiveCounter.
func (s *Sim) LiveHandles() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}
