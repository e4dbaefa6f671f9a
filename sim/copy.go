package sim

import (
	"sync"

	"github.com/cuvmm/cuvmm/cu"
)

// Copies and memset go through the mappings, as the copy engines do: every byte must be
// mapped and the copying device must have read access to the source and read-write access
// to the destination, or the call fails as a whole before moving a byte (recorded:
// CUDA_ERROR_INVALID_VALUE for no access, read-only destinations, unmapped bytes and ranges
// that run past a mapping).

// checkRange validates [addr, addr+n) for device ordinal.
func (s *Sim) checkRange(ordinal int, addr, n uint64, write bool) *failure {
	end := addr + n
	if end < addr {
		return fail(cu.ERROR_INVALID_VALUE, "range overflows")
	}
	for cur := addr; cur < end; {
		m := s.as.mappingAt(cur)
		if m == nil {
			return fail(cu.ERROR_INVALID_VALUE, "address not mapped")
		}
		a := m.access[ordinal]
		if write && a != cu.MEM_ACCESS_FLAGS_PROT_READWRITE || !write && a == cu.MEM_ACCESS_FLAGS_PROT_NONE {
			return fail(resNoAccess, "device has no access to the mapping")
		}
		cur = m.end()
	}
	return nil
}

// io moves bytes between p and the validated range at addr: a read when write is false.
func (s *Sim) io(ordinal int, addr uint64, p []byte, write bool) *failure {
	for len(p) > 0 {
		m := s.as.mappingAt(addr)
		off := addr - m.base
		k := min(uint64(len(p)), m.size-off)
		var err error
		switch {
		case m.h.mem != nil && write:
			err = m.h.mem.st.writeAt(p[:k], off)
		case m.h.mem != nil:
			err = m.h.mem.st.readAt(p[:k], off)
		case write:
			err = s.mcWrite(m.h.mc, off, p[:k])
		default:
			err = s.mcRead(m.h.mc, ordinal, off, p[:k])
		}
		if err != nil {
			return fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
		}
		p, addr = p[k:], addr+k
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
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opCopyHtoD)
	if f == nil && len(src) == 0 {
		f = argFail("empty host buffer")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	if f == nil {
		f = s.checkRange(ordinal, uint64(dst), uint64(len(src)), true)
	}
	if f == nil {
		f = s.io(ordinal, uint64(dst), src, true)
	}
	return f.wrap("cuMemcpyHtoD", "%v, %d bytes", dst, len(src))
}

// CopyDtoH is cuMemcpyDtoH from device ordinal's context.
func (s *Sim) CopyDtoH(ordinal int, dst []byte, src cu.DevicePtr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opCopyDtoH)
	if f == nil && len(dst) == 0 {
		f = argFail("empty host buffer")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	if f == nil {
		f = s.checkRange(ordinal, uint64(src), uint64(len(dst)), false)
	}
	if f == nil {
		f = s.io(ordinal, uint64(src), dst, false)
	}
	return f.wrap("cuMemcpyDtoH", "%v, %d bytes", src, len(dst))
}

const chunk = 1 << 20

var chunks = sync.Pool{New: func() any { return new([chunk]byte) }}

// CopyDtoD is cuMemcpyDtoD from device ordinal's context. Overlapping ranges copy as
// memmove does (recorded: the driver accepts them).
func (s *Sim) CopyDtoD(ordinal int, dst, src cu.DevicePtr, size uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opCopyDtoD)
	if f == nil && size == 0 {
		f = argFail("zero size")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	if f == nil {
		f = s.checkRange(ordinal, uint64(src), size, false)
	}
	if f == nil {
		f = s.checkRange(ordinal, uint64(dst), size, true)
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
			f = s.io(ordinal, uint64(src)+off, buf[:k], false)
			if f == nil {
				f = s.io(ordinal, uint64(dst)+off, buf[:k], true)
			}
			done += k
		}
		chunks.Put(buf)
	}
	return f.wrap("cuMemcpyDtoD", "%v <- %v, %d bytes", dst, src, size)
}

// MemsetD8 is cuMemsetD8 from device ordinal's context.
func (s *Sim) MemsetD8(ordinal int, dst cu.DevicePtr, v uint8, n uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opMemsetD8)
	if f == nil && n == 0 {
		f = argFail("zero count")
	}
	if f == nil {
		f = s.copyDevice(ordinal)
	}
	if f == nil {
		f = s.checkRange(ordinal, uint64(dst), n, true)
	}
	for addr, end := uint64(dst), uint64(dst)+n; f == nil && addr < end; {
		m := s.as.mappingAt(addr)
		off := addr - m.base
		k := min(end-addr, m.size-off)
		var err error
		if m.h.mem != nil {
			err = m.h.mem.st.fill(off, k, v)
		} else {
			err = s.mcFill(m.h.mc, off, k, v)
		}
		if err != nil {
			f = fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
		}
		addr += k
	}
	return f.wrap("cuMemsetD8", "%v, %#x, %d", dst, v, n)
}
