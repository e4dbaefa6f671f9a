package sim

import "github.com/cuvmm/cuvmm/cu"

// PointerAttributes is cuPointerGetAttributes for the attributes of
// cu.PointerAttributeSet, asked from device ordinal's context, as recorded (vmmtest
// pointer/). An address in a mapping reports it: memory type DEVICE (HOST for host memory),
// the owning device (the asking one for host memory and multicast objects), the reservation
// as the range, the mapping, the handle's shareable types and GPUDirect RDMA flag as
// cuMemGetAllocationPropertiesFromHandle reports them, the asking device's access, a buffer
// id per mapping and a memory block id per allocation (both unique in the Sim, never
// reused). sim has no managed, legacy-IPC, pool or decompression memory. Any other address
// reports no memory and device CU_DEVICE_INVALID, with the reservation as the range when
// it lies in one, and no error. A device that does not exist is CUDA_ERROR_INVALID_DEVICE
// (cu fails to get its context).
func (s *Sim) PointerAttributes(ordinal int, ptr cu.DevicePtr) (cu.PointerAttributes, error) {
	p, f := locked(s, OpPointerAttributes, func() (cu.PointerAttributes, *failure) { return s.pointer(ordinal, uint64(ptr)) })
	if f != nil {
		return cu.PointerAttributes{}, f.wrap("cuPointerGetAttributes", "%v, device %d", ptr, ordinal)
	}
	return p, nil
}

func (s *Sim) pointer(ordinal int, ptr uint64) (cu.PointerAttributes, *failure) {
	if _, f := s.device(ordinal); f != nil {
		return cu.PointerAttributes{}, f
	}
	p := cu.PointerAttributes{DeviceOrdinal: cu.DEVICE_INVALID}
	if base, size, ok := s.va.resvAt(ptr); ok {
		p.RangeStart, p.RangeSize = cu.DevicePtr(base), size
	}
	m := s.va.mappingAt(ptr)
	if m == nil {
		return p, nil
	}
	if p.RangeSize == 0 {
		p.RangeStart, p.RangeSize = cu.DevicePtr(m.base), m.size
	}
	p.MemoryType = cu.MEMORYTYPE_DEVICE
	p.DeviceOrdinal = ordinal
	p.Mapped = true
	p.MappingBase, p.MappingSize = cu.DevicePtr(m.base), m.size
	p.HandleTypes = m.h.prop.RequestedHandleTypes
	p.GPUDirectRDMA = m.h.prop.GPUDirectRDMACapable != 0
	p.Access = cu.PointerAccessFlags(m.access[ordinal])
	p.BufferID = s.lazyID(&m.buffer)
	if mem := m.h.mem; mem != nil {
		if mem.dev >= 0 {
			p.DeviceOrdinal = mem.dev
		} else {
			p.MemoryType = cu.MEMORYTYPE_HOST
		}
		p.MemoryBlockID = mem.id
		if p.MemoryBlockID == 0 {
			p.MemoryBlockID = s.lazyID(&mem.block)
		}
	}
	return p, nil
}

// lazyID returns the id in v, giving it the Sim's next id first if it has none.
func (s *Sim) lazyID(v *uint64) uint64 {
	if *v == 0 {
		s.nextID++
		*v = s.nextID
	}
	return *v
}
