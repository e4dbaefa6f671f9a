package sim

import (
	"math/bits"
	"slices"

	"github.com/cuvmm/cuvmm/cu"
)

// The virtual memory management calls. Each check below is one driver rule; where the
// real driver's answer was recorded (H100 and H200, driver 580) the comment names the
// vmmtest cases that hold the recording ("recorded: vmmtest group/case").

// vmm rejects VMM calls on a machine none of whose devices supports VMM.
func (s *Sim) vmm() *failure {
	if s.noVMM {
		return fail(cu.ERROR_NOT_SUPPORTED, "no device supports virtual memory management")
	}
	return nil
}

const knownHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | cu.MEM_HANDLE_TYPE_WIN32 |
	cu.MEM_HANDLE_TYPE_WIN32_KMT | cu.MEM_HANDLE_TYPE_FABRIC

// granularityOf returns the granularity that applies to prop's location. Recorded: the
// driver answers for any location, even an invalid one, with the device granularity.
func (s *Sim) granularityOf(loc cu.MemLocation, recommended bool) uint64 {
	d := &s.cfg.Devices[0]
	if loc.Type == cu.MEM_LOCATION_TYPE_DEVICE && loc.ID >= 0 && int(loc.ID) < len(s.cfg.Devices) {
		d = &s.cfg.Devices[loc.ID]
	}
	if recommended {
		return d.RecommendedGranularity
	}
	return d.Granularity
}

// Granularity is cuMemGetAllocationGranularity.
func (s *Sim) Granularity(prop *cu.MemAllocationProp, option cu.MemAllocationGranularityFlags) (uint64, error) {
	f := s.enter(OpGranularity)
	if f == nil && prop == nil {
		f = argFail("nil properties")
	}
	if f == nil {
		f = s.vmm()
	}
	if f == nil && option != cu.MEM_ALLOC_GRANULARITY_MINIMUM && option != cu.MEM_ALLOC_GRANULARITY_RECOMMENDED {
		f = fail(cu.ERROR_INVALID_VALUE, "unknown granularity option") // recorded: vmmtest granularity/bad-option, sweep/granularity-option-2
	}
	if f != nil {
		if prop == nil {
			return 0, f.wrap("cuMemGetAllocationGranularity", "nil, %d", option)
		}
		return 0, f.wrap("cuMemGetAllocationGranularity", "%+v, %d", *prop, option)
	}
	return s.granularityOf(prop.Location, option == cu.MEM_ALLOC_GRANULARITY_RECOMMENDED), nil
}

// checkProp validates cuMemCreate's properties and returns them as the driver stores them
// (what cuMemGetAllocationPropertiesFromHandle reports) with the owning device (-1: host).
func (s *Sim) checkProp(size uint64, p cu.MemAllocationProp, flags uint64) (cu.MemAllocationProp, int, *failure) {
	if flags != 0 {
		return p, 0, fail(cu.ERROR_INVALID_VALUE, "flags must be 0") // recorded: vmmtest create/nonzero-flags
	}
	if p.Type != cu.MEM_ALLOCATION_TYPE_PINNED {
		return p, 0, fail(cu.ERROR_INVALID_VALUE, "type must be MEM_ALLOCATION_TYPE_PINNED") // recorded: vmmtest create/invalid-type, create/managed-type
	}
	if p.Reserved != [4]uint8{} {
		return p, 0, fail(cu.ERROR_INVALID_VALUE, "reserved bytes must be 0") // recorded: vmmtest create/reserved-bytes-set
	}
	if p.CompressionType > cu.MEM_ALLOCATION_COMP_GENERIC {
		return p, 0, fail(cu.ERROR_INVALID_VALUE, "unknown compression type") // recorded: vmmtest sweep/create-compression-2
	}
	dev := -1
	var d *Device
	switch p.Location.Type {
	case cu.MEM_LOCATION_TYPE_DEVICE:
		if p.Location.ID < 0 || int(p.Location.ID) >= len(s.cfg.Devices) {
			return p, 0, fail(cu.ERROR_INVALID_DEVICE, "no such device") // recorded: vmmtest create/bad-device, create/negative-device
		}
		dev = int(p.Location.ID)
		d = &s.cfg.Devices[dev]
		if !d.VMM {
			return p, 0, fail(cu.ERROR_NOT_SUPPORTED, "device does not support virtual memory management")
		}
	case cu.MEM_LOCATION_TYPE_HOST, cu.MEM_LOCATION_TYPE_HOST_NUMA:
		d = &s.cfg.Devices[0]
		if p.Location.Type == cu.MEM_LOCATION_TYPE_HOST && !d.HostVMM ||
			p.Location.Type == cu.MEM_LOCATION_TYPE_HOST_NUMA && !d.HostNUMAVMM {
			return p, 0, fail(cu.ERROR_INVALID_VALUE, "host-located VMM memory is not supported")
		}
		if p.Location.Type == cu.MEM_LOCATION_TYPE_HOST_NUMA && (p.Location.ID < 0 || int(p.Location.ID) >= s.cfg.HostNUMANodes) {
			return p, 0, fail(cu.ERROR_INVALID_VALUE, "no such host NUMA node")
		}
		if p.RequestedHandleTypes&(cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR|cu.MEM_HANDLE_TYPE_FABRIC) != 0 {
			return p, 0, fail(cu.ERROR_INVALID_VALUE, "host memory cannot be exported") // recorded for POSIX: vmmtest edges/create-host-posix-fd
		}
		// Host memory is reported as HOST_NUMA node 0 (recorded: vmmtest sweep/create-host-properties).
		if p.Location.Type == cu.MEM_LOCATION_TYPE_HOST {
			p.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}
		}
	default:
		return p, 0, fail(cu.ERROR_INVALID_VALUE, "invalid location type") // recorded: vmmtest sweep/create-location-invalid, create/host-numa-current
	}
	// Bits the driver does not know are dropped, as is Usage; GPUDirectRDMACapable reads back
	// as 0 or 1 (recorded: vmmtest sweep/create-handle-type-0x10-properties,
	// sweep/create-usage-1-properties, sweep/create-gpudirect-rdma-2-properties).
	p.RequestedHandleTypes &= knownHandleTypes
	p.Usage = 0
	p.Win32HandleMetaData = 0
	if p.GPUDirectRDMACapable != 0 {
		p.GPUDirectRDMACapable = 1
	}
	if !d.Compression {
		p.CompressionType = cu.MEM_ALLOCATION_COMP_NONE // the driver silently allocates uncompressed
	}
	t := p.RequestedHandleTypes
	switch {
	case t&cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR != 0 && !d.POSIXFD,
		t&cu.MEM_HANDLE_TYPE_WIN32 != 0 && !d.Win32,
		t&cu.MEM_HANDLE_TYPE_WIN32_KMT != 0 && !d.Win32KMT:
		return p, 0, fail(resBadHandleType, "handle type not supported by the device") // recorded for WIN32 on Linux: vmmtest create/handle-type-win32-on-linux
	case t&cu.MEM_HANDLE_TYPE_FABRIC != 0 && !d.Fabric:
		return p, 0, fail(resNoFabric, "fabric handles not supported by the device")
	case t&cu.MEM_HANDLE_TYPE_FABRIC != 0 && !s.cfg.IMEX:
		return p, 0, fail(resFabricNoIMEX, "no IMEX channel") // recorded: vmmtest fabric/create-without-imex
	}
	gran := d.Granularity
	if size == 0 || size%gran != 0 {
		return p, 0, fail(cu.ERROR_INVALID_VALUE, "size is not a positive multiple of the granularity") // recorded: vmmtest create/zero-size, create/misaligned-size
	}
	return p, dev, nil
}

// Create is cuMemCreate: size bytes of physical memory, backed lazily by host memory (or,
// for exportable allocations, by a shareable file).
func (s *Sim) Create(size uint64, prop *cu.MemAllocationProp, flags uint64) (cu.MemHandle, error) {
	f := s.fault(OpCreate)
	if f == nil && prop == nil {
		f = argFail("nil properties")
	}
	if f == nil {
		f = s.vmm()
	}
	var p cu.MemAllocationProp
	dev := 0
	if f == nil {
		p, dev, f = s.checkProp(size, *prop, flags)
	}
	if f == nil {
		f = s.commit(dev, size)
	}
	var c *memObject
	var m *phys
	if f == nil {
		c = newMemObject()
		m = &c.phys
		m.size, m.prop, m.dev, m.counted = size, p, dev, true
		m.users = 1 // the handle's reference
		if p.RequestedHandleTypes&(cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR|cu.MEM_HANDLE_TYPE_FABRIC) != 0 {
			if f = s.shareable(m); f != nil {
				s.memOf(dev).uncommit(size)
			}
		} else {
			m.st = &m.heap
		}
	}
	if f != nil {
		s.calls[OpCreate].add(1)
		if prop == nil {
			return 0, f.wrap("cuMemCreate", "%d, nil, %d", size, flags)
		}
		return 0, f.wrap("cuMemCreate", "%d, %+v, %d", size, *prop, flags)
	}
	c.handle.mem, c.handle.prop = m, p
	s.addHandle(&c.handle, shardCreate)
	return c.handle.value, nil
}

// memOf returns the budget of device dev, or of the host for -1.
func (s *Sim) memOf(dev int) *budget {
	if dev >= 0 {
		return &s.devMem[dev]
	}
	return &s.hostMem
}

// commit counts size bytes against the capacity of device dev (-1: the host), or fails as
// the driver does when the memory is exhausted.
func (s *Sim) commit(dev int, size uint64) *failure {
	switch {
	case s.memOf(dev).commit(size):
		return nil
	case dev >= 0:
		return fail(cu.ERROR_OUT_OF_MEMORY, "device memory exhausted") // recorded: vmmtest create/larger-than-device, sweep/create-1TiB
	default:
		return fail(cu.ERROR_OUT_OF_MEMORY, "host memory capacity exhausted")
	}
}

// Release is cuMemRelease. Memory stays alive while it is mapped or bound.
func (s *Sim) Release(v cu.MemHandle) error {
	f := s.fault(OpRelease)
	if f != nil {
		s.calls[OpRelease].add(1)
	} else {
		sh := s.shardOf(v)
		sh.mu.Lock()
		sh.calls[shardRelease]++
		if h := sh.lookup(v); h == nil {
			f = fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
		} else {
			s.release(sh, h)
		}
		sh.mu.Unlock()
	}
	if f != nil {
		return f.wrap("cuMemRelease", "%v", v)
	}
	return nil
}

// Retain is cuMemRetainAllocationHandle: the handle a mapping was made through, with one
// more reference. Recorded: any address inside the mapping works, it returns the very value
// used to map even after that was released, and an address in no mapping is
// CUDA_ERROR_INVALID_VALUE.
func (s *Sim) Retain(addr cu.DevicePtr) (cu.MemHandle, error) {
	f := s.enter(OpRetain)
	if f == nil {
		f = s.vmm()
	}
	var v cu.MemHandle
	if f == nil {
		var hd hold
		s.va.lock(&hd, uint64(addr), 1)
		if m := hd.mappingAt(uint64(addr)); m == nil {
			f = fail(cu.ERROR_INVALID_VALUE, "address not mapped")
		} else {
			sh := s.shardOf(m.h.value)
			sh.mu.Lock()
			sh.retain(m.h)
			sh.mu.Unlock()
			v = m.h.value
		}
		hd.unlock()
	}
	if f != nil {
		return 0, f.wrap("cuMemRetainAllocationHandle", "%v", addr)
	}
	return v, nil
}

// Properties is cuMemGetAllocationPropertiesFromHandle.
func (s *Sim) Properties(v cu.MemHandle) (cu.MemAllocationProp, error) {
	f := s.enter(OpProperties)
	var p cu.MemAllocationProp
	if f == nil {
		sh := s.shardOf(v)
		sh.mu.Lock()
		if h := sh.lookup(v); h == nil {
			f = fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
		} else if h.mem == nil {
			f = fail(cu.ERROR_INVALID_VALUE, "a multicast object has no allocation properties")
		} else {
			p = h.prop
		}
		sh.mu.Unlock()
	}
	if f != nil {
		return cu.MemAllocationProp{}, f.wrap("cuMemGetAllocationPropertiesFromHandle", "%v", v)
	}
	return p, nil
}

// Reserve is cuMemAddressReserve. Recorded: size must be a multiple of the granularity,
// alignment 0 or a power of two (smaller ones mean the granularity), flags 0, a hint
// aligned; a hint that is taken is ignored, a hint above 2^47 is CUDA_ERROR_OUT_OF_MEMORY;
// more than the address space is CUDA_ERROR_OUT_OF_MEMORY. Placement follows the
// vmmtest placement/ cases: first fit, each reservation aligned to the largest power of
// two not above its size up to Config.PlacementAlign.
func (s *Sim) Reserve(size, alignment uint64, hint cu.DevicePtr, flags uint64) (cu.DevicePtr, error) {
	f := s.fault(OpReserve)
	if f == nil {
		f = s.vmm()
	}
	unit := s.va.unit
	switch {
	case f != nil:
	case size == 0 || size%unit != 0:
		f = fail(cu.ERROR_INVALID_VALUE, "size is not a positive multiple of the granularity")
	case alignment != 0 && !isPow2(alignment):
		f = fail(cu.ERROR_INVALID_VALUE, "alignment is not a power of two")
	case flags != 0:
		f = fail(cu.ERROR_INVALID_VALUE, "flags must be 0")
	case uint64(hint)%unit != 0:
		f = fail(cu.ERROR_INVALID_VALUE, "hint is not aligned to the granularity")
	case uint64(hint) >= 1<<47:
		f = fail(cu.ERROR_OUT_OF_MEMORY, "hint above the 47-bit address space") // recorded: vmmtest placement/hint-above-47-bits
	}
	var addr uint64
	if f != nil {
		s.calls[OpReserve].add(1)
	} else {
		hintAlign := max(alignment, unit)
		align := max(hintAlign, min(1<<(bits.Len64(size)-1), s.cfg.PlacementAlign))
		s.va.mu.Lock()
		s.va.calls[OpReserve]++
		addr = s.reserveAt(size, align, hintAlign, uint64(hint))
		s.va.mu.Unlock()
		if addr == 0 {
			f = fail(cu.ERROR_OUT_OF_MEMORY, "virtual address space exhausted")
		}
	}
	if f != nil {
		return 0, f.wrap("cuMemAddressReserve", "size %d, alignment %d, hint %v, flags %d", size, alignment, hint, flags)
	}
	return cu.DevicePtr(addr), nil
}

// reserveAt places a reservation, at hint when it is free unless the configuration refuses
// hints; 0 when the address space is full. The caller holds s.va.mu.
//
// A refused hint where first fit lands anyway gives the next range first fit would find,
// found without reserving the hint's range first: that range is visible to the calls that
// do not take s.va.mu while it is reserved, and a mapping already running into it (one may
// run past its own reservation) would keep it from being freed again.
func (s *Sim) reserveAt(size, align, hintAlign, hint uint64) uint64 {
	if !s.cfg.RefuseHints || hint == 0 {
		return s.va.reserve(size, align, hintAlign, hint)
	}
	return s.va.firstFit(size, align, hint)
}

// Free is cuMemAddressFree. Recorded: ptr and size must be exactly one reservation (not
// part of one, not two adjacent ones), with nothing mapped in it.
func (s *Sim) Free(ptr cu.DevicePtr, size uint64) error {
	f := s.fault(OpFree)
	if f == nil {
		f = s.vmm()
	}
	if f != nil {
		s.calls[OpFree].add(1)
	} else {
		s.va.mu.Lock()
		s.va.calls[OpFree]++
		why := s.va.unreserve(uint64(ptr), size)
		s.va.mu.Unlock()
		if why != "" {
			f = fail(cu.ERROR_INVALID_VALUE, why)
		}
	}
	if f != nil {
		return f.wrap("cuMemAddressFree", "%v, %d", ptr, size)
	}
	return nil
}

// target resolves the handle of a cuMemMap: its size and granularity.
func (h *handle) sizeAndGranularity(s *Sim) (size, gran uint64) {
	if h.mem != nil {
		return h.mem.size, s.granularityOf(h.mem.prop.Location, false)
	}
	return h.mc.prop.Size, s.cfg.MulticastGranularity
}

// Map is cuMemMap. Recorded, in this order: size 0 and flags are CUDA_ERROR_INVALID_VALUE;
// a nonzero offset, or a size other than the allocation's, CUDA_ERROR_NOT_SUPPORTED (the
// driver maps whole allocations only); a misaligned address, an address outside any
// reservation or a range overlapping a mapping CUDA_ERROR_INVALID_VALUE. Only the start must
// be reserved (see addrSpace.covered). A mapping starts with no access for anyone.
func (s *Sim) Map(ptr cu.DevicePtr, size, offset uint64, v cu.MemHandle, flags uint64) error {
	f := s.fault(OpMap)
	if f == nil {
		f = s.vmm()
	}
	if f != nil {
		s.calls[OpMap].add(1)
		return f.wrap("cuMemMap", "%v, %d, offset %d, %v, flags %d", ptr, size, offset, v, flags)
	}
	var hd hold
	s.va.lock(&hd, uint64(ptr), size)
	if !hd.count(resvMap) {
		s.calls[OpMap].add(1)
	}
	sh := s.shardOf(v)
	sh.mu.Lock()
	h := sh.lookup(v)
	switch {
	case h == nil:
		f = fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
	case size == 0:
		f = fail(cu.ERROR_INVALID_VALUE, "size 0")
	case flags != 0:
		f = fail(cu.ERROR_INVALID_VALUE, "flags must be 0")
	case h.mc != nil:
		f = s.waitTeam(h)
	}
	if f == nil {
		hsize, gran := h.sizeAndGranularity(s)
		switch {
		case offset != 0:
			f = fail(cu.ERROR_NOT_SUPPORTED, "offset must be 0")
		case size != hsize:
			f = fail(cu.ERROR_NOT_SUPPORTED, "only whole allocations can be mapped")
		case uint64(ptr)%gran != 0:
			f = fail(cu.ERROR_INVALID_VALUE, "address not aligned to the granularity")
		case !hd.covered(uint64(ptr), size):
			f = fail(cu.ERROR_INVALID_VALUE, "range not reserved")
		case uint64(ptr)+size > s.va.end:
			f = fail(cu.ERROR_INVALID_VALUE, "range runs past the end of the address space")
		}
	}
	if f == nil && hd.anyMapped(uint64(ptr), size) {
		f = fail(cu.ERROR_INVALID_VALUE, "range already mapped")
	}
	if f == nil {
		m := newMapping(uint64(ptr), size, h, len(s.cfg.Devices))
		hd.add(m)
		h.maps++
		if h.mem != nil {
			h.mem.use()
		}
	}
	sh.mu.Unlock()
	hd.unlock()
	if f != nil {
		return f.wrap("cuMemMap", "%v, %d, offset %d, %v, flags %d", ptr, size, offset, v, flags)
	}
	return nil
}

// Unmap is cuMemUnmap. Recorded: the range must start in a reservation and not be empty; every mapping it
// touches must lie wholly inside it (it can hold several, and unmapped gaps, which are
// no-ops, and need not be aligned otherwise); anything else is CUDA_ERROR_INVALID_VALUE.
func (s *Sim) Unmap(ptr cu.DevicePtr, size uint64) error {
	f := s.fault(OpUnmap)
	if f == nil {
		f = s.vmm()
	}
	if f == nil && size == 0 {
		f = fail(cu.ERROR_INVALID_VALUE, "size 0")
	}
	if f != nil {
		s.calls[OpUnmap].add(1)
		return f.wrap("cuMemUnmap", "%v, %d", ptr, size)
	}
	var hd hold
	s.va.lock(&hd, uint64(ptr), size)
	if !hd.count(resvUnmap) {
		s.calls[OpUnmap].add(1)
	}
	var buf [4]*mapping
	if !hd.covered(uint64(ptr), size) {
		f = fail(cu.ERROR_INVALID_VALUE, "range not reserved")
	} else if victims, ok := hd.whole(uint64(ptr), size, buf[:]); !ok {
		f = fail(cu.ERROR_INVALID_VALUE, "range splits a mapping")
	} else {
		for i := len(victims) - 1; i >= 0; i-- {
			s.unmap(&hd, victims[i])
		}
	}
	hd.unlock()
	if f != nil {
		return f.wrap("cuMemUnmap", "%v, %d", ptr, size)
	}
	return nil
}

// unmap removes m, which hd holds.
func (s *Sim) unmap(hd *hold, m *mapping) {
	hd.remove(m)
	sh := s.shardOf(m.h.value)
	sh.mu.Lock()
	s.unmapped(sh, m.h)
	sh.mu.Unlock()
	m.recycle()
}

// checkDesc validates one access descriptor. Recorded: host locations are
// CUDA_ERROR_NOT_SUPPORTED; other types, bad ordinals and flags CUDA_ERROR_INVALID_VALUE.
func (s *Sim) checkDesc(d cu.MemAccessDesc) *failure {
	switch d.Location.Type {
	case cu.MEM_LOCATION_TYPE_DEVICE:
	case cu.MEM_LOCATION_TYPE_HOST, cu.MEM_LOCATION_TYPE_HOST_NUMA:
		return fail(cu.ERROR_NOT_SUPPORTED, "host access to device mappings cannot be set")
	default:
		return fail(cu.ERROR_INVALID_VALUE, "invalid location type")
	}
	if d.Location.ID < 0 || int(d.Location.ID) >= len(s.cfg.Devices) {
		return fail(cu.ERROR_INVALID_VALUE, "no such device")
	}
	switch d.Flags {
	case cu.MEM_ACCESS_FLAGS_PROT_NONE, cu.MEM_ACCESS_FLAGS_PROT_READ, cu.MEM_ACCESS_FLAGS_PROT_READWRITE:
		return nil
	}
	return fail(cu.ERROR_INVALID_VALUE, "invalid access flags")
}

// device returns the device that owns a mapping's memory (-1: host or multicast).
func (m *mapping) device() int {
	if m.h.mem != nil {
		return m.h.mem.dev
	}
	return -1
}

// SetAccess is cuMemSetAccess. Recorded: the range must start at the start of a mapping and
// end at the end of one, splitting none; gaps between mappings are allowed. Descriptors
// apply in order, all or nothing.
func (s *Sim) SetAccess(ptr cu.DevicePtr, size uint64, desc []cu.MemAccessDesc) error {
	f := s.fault(OpSetAccess)
	if f == nil && len(desc) == 0 {
		f = argFail("no access descriptors")
	}
	if f == nil {
		f = s.vmm()
	}
	if f == nil && size == 0 {
		f = fail(cu.ERROR_INVALID_VALUE, "size 0")
	}
	for i := 0; f == nil && i < len(desc); i++ {
		f = s.checkDesc(desc[i])
	}
	if f != nil {
		s.calls[OpSetAccess].add(1)
		return f.wrap("cuMemSetAccess", "%v, %d, %+v", ptr, size, desc)
	}
	var hd hold
	s.va.lock(&hd, uint64(ptr), size)
	if !hd.count(resvSetAccess) {
		s.calls[OpSetAccess].add(1)
	}
	var buf [4]*mapping
	ms, whole := hd.whole(uint64(ptr), size, buf[:])
	switch {
	case uint64(ptr)+size < uint64(ptr):
		f = fail(cu.ERROR_INVALID_VALUE, "range overflows")
	case len(ms) == 0 || ms[0].base != uint64(ptr) || ms[len(ms)-1].end() != uint64(ptr)+size:
		f = fail(cu.ERROR_INVALID_VALUE, "range does not start and end with whole mappings")
	case !whole:
		f = fail(cu.ERROR_INVALID_VALUE, "range splits a mapping")
	}
	for i := 0; f == nil && i < len(ms); i++ {
		for _, d := range desc {
			if d.Flags != cu.MEM_ACCESS_FLAGS_PROT_NONE && !s.canAccess(int(d.Location.ID), ms[i].device()) {
				f = fail(resNoPeer, "device has no peer access to the memory's device")
				break
			}
		}
	}
	if f == nil {
		for _, m := range ms {
			for _, d := range desc {
				m.access[d.Location.ID] = d.Flags
			}
		}
	}
	hd.unlock()
	if f != nil {
		return f.wrap("cuMemSetAccess", "%v, %d, %+v", ptr, size, desc)
	}
	return nil
}

// GetAccess is cuMemGetAccess. Recorded: a location that is not a device, the host or a host
// NUMA node, or a device that does not exist, is CUDA_ERROR_INVALID_DEVICE; an address in
// no mapping CUDA_ERROR_INVALID_VALUE. The host reads the owning device's access (any host
// ID); a host NUMA node reads no access.
func (s *Sim) GetAccess(loc cu.MemLocation, ptr cu.DevicePtr) (cu.MemAccessFlags, error) {
	f := s.enter(OpGetAccess)
	if f == nil {
		f = s.vmm()
	}
	if f == nil {
		switch loc.Type {
		case cu.MEM_LOCATION_TYPE_DEVICE:
			if loc.ID < 0 || int(loc.ID) >= len(s.cfg.Devices) {
				f = fail(cu.ERROR_INVALID_DEVICE, "no such device")
			}
		case cu.MEM_LOCATION_TYPE_HOST, cu.MEM_LOCATION_TYPE_HOST_NUMA:
		default:
			f = fail(cu.ERROR_INVALID_DEVICE, "invalid location type")
		}
	}
	if f != nil {
		return 0, f.wrap("cuMemGetAccess", "%+v, %v", loc, ptr)
	}
	var hd hold
	s.va.lock(&hd, uint64(ptr), 1)
	a := cu.MEM_ACCESS_FLAGS_PROT_NONE
	if m := hd.mappingAt(uint64(ptr)); m == nil {
		f = fail(cu.ERROR_INVALID_VALUE, "address not mapped")
	} else {
		switch loc.Type {
		case cu.MEM_LOCATION_TYPE_DEVICE:
			a = m.access[loc.ID]
		case cu.MEM_LOCATION_TYPE_HOST:
			if o := m.device(); o >= 0 {
				a = m.access[o]
			}
		}
	}
	hd.unlock()
	if f != nil {
		return 0, f.wrap("cuMemGetAccess", "%+v, %v", loc, ptr)
	}
	return a, nil
}

// AddressRange is cuMemGetAddressRange. Recorded (with a current context): the base and size
// of the mapping holding ptr; CUDA_ERROR_NOT_FOUND for an address in no mapping or in one no
// device may access.
func (s *Sim) AddressRange(ptr cu.DevicePtr) (cu.DevicePtr, uint64, error) {
	f := s.enter(OpAddressRange)
	var base, size uint64
	if f == nil {
		var hd hold
		s.va.lock(&hd, uint64(ptr), 1)
		if m := hd.mappingAt(uint64(ptr)); m == nil {
			f = fail(resNotFound, "address not mapped")
		} else if !slices.ContainsFunc(m.access, func(a cu.MemAccessFlags) bool { return a != cu.MEM_ACCESS_FLAGS_PROT_NONE }) {
			f = fail(resNotFound, "no device may access the mapping")
		} else {
			base, size = m.base, m.size
		}
		hd.unlock()
	}
	if f != nil {
		return 0, 0, f.wrap("cuMemGetAddressRange", "%v", ptr)
	}
	return cu.DevicePtr(base), size, nil
}
