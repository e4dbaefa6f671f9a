package sim

import (
	"slices"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
)

// Copies and memset go through the mappings, as the copy engines do: every byte must be
// mapped and the copying device must have read access to the source and read-write access
// to the destination, or the call fails as a whole before moving a byte:
// CUDA_ERROR_INVALID_VALUE for no access, read-only destinations, unmapped bytes and ranges
// that run past a mapping (recorded: vmmtest dangerous/no-access-htod,
// dangerous/read-only-htod, faults/dtoh-h2-no-access, copy/unmapped, copy/htod-past-mapping).
//
// A copy checks its ranges and takes a user of the memory behind them under the Sim's lock,
// moves the bytes without it (the stores are safe for concurrent use), and takes it again
// to let go of the memory: a large copy does not stop other calls, and the memory outlives
// the copy whatever is unmapped or released meanwhile.

// segment is the part of a checked range that one mapping holds: bytes of mem, or of a
// multicast object, whose bindings over the segment are copied into binds.
type segment struct {
	mem   *phys
	binds []binding
	off   uint64 // where the segment starts in mem or in the multicast object
	n     uint64
}

// transfer is a call of o, a copy or memset of n bytes from device ordinal's context. Under
// the lock it counts the call, checks what package cu and the context lookup check (empty
// is why n 0 is refused), and pins the source at *src for reading and the destination at
// *dst for writing, either of which may be nil; then it runs work on the pinned segments
// without the lock, and lets go of the memory.
func (s *Sim) transfer(o Op, ordinal int, n uint64, empty string, src, dst *cu.DevicePtr, work func(from, to []segment) *failure) *failure {
	var sbuf, dbuf [4]segment
	var from, to []segment
	f := s.do(o, func() (f *failure) {
		if n == 0 {
			return argFail(empty)
		}
		if _, f := s.device(ordinal); f != nil {
			return f
		}
		if src != nil {
			if from, f = s.pin(ordinal, uint64(*src), n, false, sbuf[:]); f != nil {
				return f
			}
		}
		if dst != nil {
			if to, f = s.pin(ordinal, uint64(*dst), n, true, dbuf[:]); f != nil {
				s.unpin(from)
			}
		}
		return f
	})
	if f != nil {
		return f
	}
	f = work(from, to)
	s.mu.Lock()
	s.unpin(from)
	s.unpin(to)
	s.mu.Unlock()
	return f
}

// pin checks [addr, addr+n) for device ordinal and returns its segments (appended to
// segs[:0]), each holding a user of its memory until unpin.
func (s *Sim) pin(ordinal int, addr, n uint64, write bool, segs []segment) ([]segment, *failure) {
	end := addr + n
	if end < addr {
		return nil, fail(cu.ERROR_INVALID_VALUE, "range overflows")
	}
	segs = segs[:0]
	for cur := addr; cur < end; {
		m := s.va.mappingAt(cur)
		if m == nil {
			return nil, fail(cu.ERROR_INVALID_VALUE, "address not mapped")
		}
		a := m.access[ordinal]
		if write && a != cu.MEM_ACCESS_FLAGS_PROT_READWRITE || !write && a == cu.MEM_ACCESS_FLAGS_PROT_NONE {
			return nil, fail(resNoAccess, "device has no access to the mapping")
		}
		k := min(end, m.end()) - cur
		sg := segment{mem: m.h.mem, off: cur - m.base, n: k}
		if mc := m.h.mc; mc != nil {
			for _, b := range mc.binds {
				if _, _, _, ok := b.overlap(sg.off, k); ok {
					sg.binds = append(sg.binds, *b)
				}
			}
		}
		segs = append(segs, sg)
		cur += k
	}
	for _, sg := range segs {
		if sg.mem != nil {
			sg.mem.users++
		}
		for _, b := range sg.binds {
			b.mem.users++
		}
	}
	return segs, nil
}

// unpin lets go of the memory of segs.
func (s *Sim) unpin(segs []segment) {
	for _, sg := range segs {
		if sg.mem != nil {
			s.unuse(sg.mem)
		}
		for _, b := range sg.binds {
			s.unuse(b.mem)
		}
	}
}

// move moves len(p) bytes between p and the pinned range segs, from offset at of the range:
// a read when write is false. A multicast object's write goes to every bound replica; a
// read comes from the reading device's replica where it has one bound, else from the bound
// replica of the lowest device; unbound ranges drop writes and read as zeros.
func move(ordinal int, segs []segment, at uint64, p []byte, write bool) *failure {
	for _, sg := range segs {
		if len(p) == 0 {
			break
		}
		if at >= sg.n {
			at -= sg.n
			continue
		}
		k := min(uint64(len(p)), sg.n-at)
		q, off := p[:k], sg.off+at
		var err error
		switch {
		case sg.mem != nil && write:
			err = sg.mem.st.writeAt(q, off)
		case sg.mem != nil:
			err = sg.mem.st.readAt(q, off)
		case write:
			for _, b := range sg.binds {
				if from, to, mo, ok := b.overlap(off, k); ok && err == nil {
					err = b.mem.st.writeAt(q[from:to], mo)
				}
			}
		default:
			clear(q)
			// The least preferred first, so that the preferred replica's bytes land last.
			order := slices.Clone(sg.binds)
			slices.SortStableFunc(order, func(a, b binding) int { return rank(b.dev, ordinal) - rank(a.dev, ordinal) })
			for _, b := range order {
				if from, to, mo, ok := b.overlap(off, k); ok && err == nil {
					err = b.mem.st.readAt(q[from:to], mo)
				}
			}
		}
		if err != nil {
			return fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
		}
		p, at = p[k:], 0
	}
	return nil
}

// rank orders replicas for reading: the reader's own first, then by ordinal.
func rank(dev, reader int) int {
	if dev == reader {
		return -1
	}
	return dev
}

// CopyHtoD is cuMemcpyHtoD from device ordinal's context.
func (s *Sim) CopyHtoD(ordinal int, dst cu.DevicePtr, src []byte) error {
	f := s.transfer(OpCopyHtoD, ordinal, uint64(len(src)), "empty host buffer", nil, &dst, func(_, to []segment) *failure {
		return move(ordinal, to, 0, src, true)
	})
	if f != nil {
		return f.wrap("cuMemcpyHtoD", "%v, %d bytes", dst, len(src))
	}
	return nil
}

// CopyDtoH is cuMemcpyDtoH from device ordinal's context.
func (s *Sim) CopyDtoH(ordinal int, dst []byte, src cu.DevicePtr) error {
	f := s.transfer(OpCopyDtoH, ordinal, uint64(len(dst)), "empty host buffer", &src, nil, func(from, _ []segment) *failure {
		return move(ordinal, from, 0, dst, false)
	})
	if f != nil {
		return f.wrap("cuMemcpyDtoH", "%v, %d bytes", src, len(dst))
	}
	return nil
}

const chunk = 1 << 20

var chunks = sync.Pool{New: func() any { return new([chunk]byte) }}

// CopyDtoD is cuMemcpyDtoD from device ordinal's context. Overlapping ranges copy as
// memmove does (the driver accepts them, recorded: vmmtest walk/dtod-overlapping).
func (s *Sim) CopyDtoD(ordinal int, dst, src cu.DevicePtr, size uint64) error {
	f := s.transfer(OpCopyDtoD, ordinal, size, "zero size", &src, &dst, func(from, to []segment) (f *failure) {
		buf := chunks.Get().(*[chunk]byte)
		defer chunks.Put(buf)
		// Copy backwards when the destination starts inside the source, so that each chunk
		// is read before it is overwritten.
		backward := dst > src && uint64(dst) < uint64(src)+size
		for done := uint64(0); done < size && f == nil; {
			k := min(size-done, chunk)
			off := done
			if backward {
				off = size - done - k
			}
			if f = move(ordinal, from, off, buf[:k], false); f == nil {
				f = move(ordinal, to, off, buf[:k], true)
			}
			done += k
		}
		return f
	})
	if f != nil {
		return f.wrap("cuMemcpyDtoD", "%v <- %v, %d bytes", dst, src, size)
	}
	return nil
}

// MemsetD8 is cuMemsetD8 from device ordinal's context.
func (s *Sim) MemsetD8(ordinal int, dst cu.DevicePtr, v uint8, n uint64) error {
	f := s.transfer(OpMemsetD8, ordinal, n, "zero count", nil, &dst, func(_, to []segment) *failure { return fill(to, v) })
	if f != nil {
		return f.wrap("cuMemsetD8", "%v, %#x, %d", dst, v, n)
	}
	return nil
}

// fill sets every byte of the pinned range segs to v: of a multicast object, in every
// bound replica.
func fill(segs []segment, v byte) *failure {
	for _, sg := range segs {
		var err error
		if sg.mem != nil {
			err = sg.mem.st.fill(sg.off, sg.n, v)
		}
		for _, b := range sg.binds {
			if from, to, mo, ok := b.overlap(sg.off, sg.n); ok && err == nil {
				err = b.mem.st.fill(mo, to-from, v)
			}
		}
		if err != nil {
			return fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
		}
	}
	return nil
}
