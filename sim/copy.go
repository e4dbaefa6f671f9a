package sim

import (
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
// A copy checks its ranges and takes a user of the memory behind them under the locks of
// the reservations they lie in, then moves the bytes with no address-space lock held, so
// copies run in parallel with each other and with work in other reservations.

// segment is the part of a checked range that one mapping holds.
type segment struct {
	mem *phys     // the memory, or nil for a multicast object
	mc  *mcObject // the multicast object, or nil
	off uint64    // where the segment starts in mem or mc
	n   uint64
}

// pin checks [addr, addr+n) for device ordinal and returns its segments (appended to
// segs[:0]), each holding a user of its memory until unpin, so that the memory outlives the
// copy whatever else is released meanwhile.
func (s *Sim) pin(ordinal int, addr, n uint64, write bool, segs []segment) ([]segment, *failure) {
	end := addr + n
	if end < addr {
		return nil, fail(cu.ERROR_INVALID_VALUE, "range overflows")
	}
	var hd hold
	s.va.lock(&hd, addr, n)
	defer hd.unlock()
	segs = segs[:0]
	for cur := addr; cur < end; {
		m := hd.mappingAt(cur)
		if m == nil {
			return nil, fail(cu.ERROR_INVALID_VALUE, "address not mapped")
		}
		a := m.access[ordinal]
		if write && a != cu.MEM_ACCESS_FLAGS_PROT_READWRITE || !write && a == cu.MEM_ACCESS_FLAGS_PROT_NONE {
			return nil, fail(resNoAccess, "device has no access to the mapping")
		}
		k := min(end, m.end()) - cur
		segs = append(segs, segment{mem: m.h.mem, mc: m.h.mc, off: cur - m.base, n: k})
		cur += k
	}
	for _, sg := range segs {
		if sg.mem != nil {
			sg.mem.use()
		}
	}
	return segs, nil
}

func (s *Sim) unpin(segs []segment) {
	for _, sg := range segs {
		if sg.mem != nil {
			s.unuse(sg.mem)
		}
	}
}

// io moves len(p) bytes between p and the pinned range segs, from offset at of the range:
// a read when write is false.
func (s *Sim) io(ordinal int, segs []segment, at uint64, p []byte, write bool) *failure {
	for _, sg := range segs {
		if len(p) == 0 {
			break
		}
		if at >= sg.n {
			at -= sg.n
			continue
		}
		k := min(uint64(len(p)), sg.n-at)
		var err error
		switch {
		case sg.mem != nil && write:
			err = sg.mem.st.writeAt(p[:k], sg.off+at)
		case sg.mem != nil:
			err = sg.mem.st.readAt(p[:k], sg.off+at)
		case write:
			err = s.mcWrite(sg.mc, sg.off+at, p[:k])
		default:
			err = s.mcRead(sg.mc, ordinal, sg.off+at, p[:k])
		}
		if err != nil {
			return fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
		}
		p, at = p[k:], 0
	}
	return nil
}

// copyDevice checks the copying device's ordinal as the context lookup does.
func (s *Sim) copyDevice(ordinal int) *failure {
	_, f := s.device(ordinal)
	return f
}

// CopyHtoD is cuMemcpyHtoD from device ordinal's context.
func (s *Sim) CopyHtoD(ordinal int, dst cu.DevicePtr, src []byte) error {
	f := s.enter(OpCopyHtoD)
	if f == nil && len(src) == 0 {
		f = argFail("empty host buffer")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	if f == nil {
		var buf [4]segment
		var segs []segment
		if segs, f = s.pin(ordinal, uint64(dst), uint64(len(src)), true, buf[:]); f == nil {
			f = s.io(ordinal, segs, 0, src, true)
			s.unpin(segs)
		}
	}
	if f != nil {
		return f.wrap("cuMemcpyHtoD", "%v, %d bytes", dst, len(src))
	}
	return nil
}

// CopyDtoH is cuMemcpyDtoH from device ordinal's context.
func (s *Sim) CopyDtoH(ordinal int, dst []byte, src cu.DevicePtr) error {
	f := s.enter(OpCopyDtoH)
	if f == nil && len(dst) == 0 {
		f = argFail("empty host buffer")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	if f == nil {
		var buf [4]segment
		var segs []segment
		if segs, f = s.pin(ordinal, uint64(src), uint64(len(dst)), false, buf[:]); f == nil {
			f = s.io(ordinal, segs, 0, dst, false)
			s.unpin(segs)
		}
	}
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
	f := s.enter(OpCopyDtoD)
	if f == nil && size == 0 {
		f = argFail("zero size")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	var sbuf, dbuf [4]segment
	var from, to []segment
	if f == nil {
		from, f = s.pin(ordinal, uint64(src), size, false, sbuf[:])
	}
	if f == nil {
		if to, f = s.pin(ordinal, uint64(dst), size, true, dbuf[:]); f != nil {
			s.unpin(from)
		}
	}
	if f == nil {
		buf := chunks.Get().(*[chunk]byte)
		// Copy backwards when the destination starts inside the source, so that each chunk
		// is read before it is overwritten.
		backward := dst > src && uint64(dst) < uint64(src)+size
		for done := uint64(0); done < size && f == nil; {
			k := min(size-done, chunk)
			off := done
			if backward {
				off = size - done - k
			}
			f = s.io(ordinal, from, off, buf[:k], false)
			if f == nil {
				f = s.io(ordinal, to, off, buf[:k], true)
			}
			done += k
		}
		chunks.Put(buf)
		s.unpin(from)
		s.unpin(to)
	}
	if f != nil {
		return f.wrap("cuMemcpyDtoD", "%v <- %v, %d bytes", dst, src, size)
	}
	return nil
}

// MemsetD8 is cuMemsetD8 from device ordinal's context.
func (s *Sim) MemsetD8(ordinal int, dst cu.DevicePtr, v uint8, n uint64) error {
	f := s.enter(OpMemsetD8)
	if f == nil && n == 0 {
		f = argFail("zero count")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	if f == nil {
		var buf [4]segment
		var segs []segment
		if segs, f = s.pin(ordinal, uint64(dst), n, true, buf[:]); f == nil {
			for _, sg := range segs {
				var err error
				if sg.mem != nil {
					err = sg.mem.st.fill(sg.off, sg.n, v)
				} else {
					err = s.mcFill(sg.mc, sg.off, sg.n, v)
				}
				if err != nil {
					f = fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
					break
				}
			}
			s.unpin(segs)
		}
	}
	if f != nil {
		return f.wrap("cuMemsetD8", "%v, %#x, %d", dst, v, n)
	}
	return nil
}
