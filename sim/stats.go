package sim

import (
	"sync/atomic"
	"unsafe"
)

// Stats is a snapshot of what a Sim holds, so a test can prove that code under test leaks
// nothing: after cleanup, Clean reports true. It is exact when no call is in flight; taken
// while other goroutines call the Sim, each field is exact at some moment of the call.
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
	if st.Handles != 0 || st.Allocations != 0 || st.Multicast != 0 || st.Reservations != 0 ||
		st.Mappings != 0 || st.Bindings != 0 || st.Host != 0 {
		return false
	}
	for _, c := range st.Committed {
		if c != 0 {
			return false
		}
	}
	return true
}

// Stats returns the current counters.
func (s *Sim) Stats() Stats {
	st := Stats{
		Multicast: int(s.mcs.load()),
		Bindings:  int(s.bindings.load()),
		Committed: make([]uint64, len(s.committed)),
		Host:      s.hostCommitted.Load(),
		Calls:     make(map[string]uint64, numOps),
	}
	var calls [numOps]uint64
	st.Reservations, st.Mappings = s.va.count(&calls)
	for i := range s.committed {
		st.Committed[i] = s.committed[i].Load()
	}
	// Live memory is reachable from a handle entry (entries stay while mapped) or from a
	// multicast binding.
	seen := map[*phys]bool{}
	count := func(p *phys) {
		if !seen[p] {
			seen[p] = true
			st.Allocations++
			st.Resident += p.resident()
		}
	}
	for i := range s.handles {
		sh := &s.handles[i]
		sh.mu.Lock()
		st.Handles += sh.live
		for k, n := range sh.calls {
			calls[shardOps[k]] += n
		}
		for _, h := range sh.m {
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
		sh.mu.Unlock()
	}
	for i := range s.calls {
		if n := uint64(s.calls[i].load()) + calls[i]; n > 0 {
			st.Calls[opNames[i]] = n
		}
	}
	return st
}

// LiveHandles returns the number of valid handle values, for vmmtest.LiveCounter.
func (s *Sim) LiveHandles() int {
	n := 0
	for i := range s.handles {
		sh := &s.handles[i]
		sh.mu.Lock()
		n += sh.live
		sh.mu.Unlock()
	}
	return n
}

// counterStripes is how many cache lines a counter is spread over.
const counterStripes = 8

// counter is a count that many goroutines update: each goroutine updates the stripe its
// stack address picks, so that goroutines on different cores rarely write the same cache
// line, and a read sums the stripes. A counter written by every call on one line would
// make every core wait for that line, and the Sim would not scale with cores.
type counter struct {
	stripes [counterStripes]struct {
		n atomic.Int64
		_ [56]byte
	}
}

func (c *counter) add(d int64) {
	// Goroutine stacks are at least 8 KiB apart, so the bits above that spread goroutines
	// over the stripes; a stack that moves only changes which stripe it uses.
	var here byte
	c.stripes[(uintptr(unsafe.Pointer(&here))>>13)%counterStripes].n.Add(d)
}

func (c *counter) load() int64 {
	var n int64
	for i := range c.stripes {
		n += c.stripes[i].n.Load()
	}
	return n
}
