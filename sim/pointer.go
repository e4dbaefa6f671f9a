package sim

import (
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
)

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
	f := s.enter(OpPointerAttributes)
	if f == nil {
		_, f = s.device(ordinal)
	}
	if f != nil {
		return cu.PointerAttributes{}, f.wrap("cuPointerGetAttributes", "%v, device %d", ptr, ordinal)
	}
	var hd hold
	s.va.lock(&hd, uint64(ptr), 1)
	defer hd.unlock()
	m := hd.mappingAt(uint64(ptr))
	if m == nil {
		p := cu.PointerAttributes{DeviceOrdinal: cu.DEVICE_INVALID}
		if r := hd.resvAt(uint64(ptr)); r != nil {
			p.RangeStart, p.RangeSize = cu.DevicePtr(r.base), r.size
		}
		return p, nil
	}
	p := cu.PointerAttributes{
		MemoryType:    cu.MEMORYTYPE_DEVICE,
		DeviceOrdinal: ordinal,
		Mapped:        true,
		RangeStart:    cu.DevicePtr(m.base),
		RangeSize:     m.size,
		MappingBase:   cu.DevicePtr(m.base),
		MappingSize:   m.size,
		HandleTypes:   m.h.prop.RequestedHandleTypes,
		GPUDirectRDMA: m.h.prop.GPUDirectRDMACapable != 0,
		Access:        cu.PointerAccessFlags(m.access[ordinal]),
		BufferID:      s.lazyID(&m.buffer),
	}
	if r := hd.resvAt(uint64(ptr)); r != nil {
		p.RangeStart, p.RangeSize = cu.DevicePtr(r.base), r.size
	}
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

// lazyID returns the id in v, giving it one of the Sim's ids first if it has none.
func (s *Sim) lazyID(v *atomic.Uint64) uint64 {
	if id := v.Load(); id != 0 {
		return id
	}
	v.CompareAndSwap(0, s.nextID.Add(1))
	return v.Load()
}
