package sim

import (
	"math/bits"
	"slices"

	"github.com/cuvmm/cuvmm/cu"
)

// The virtual memory management calls. Each check below is one driver rule; where the
// real driver's answer was recorded (H100 and H200, driver 580) the comment names the
// vmmtest cases that hold the recording ("recorded: vmmtest group/case").

// vmm rejects VMM calls on a machine none of whose devices supports VMM: enter does for the
// operations of needVMM, the others' bodies once package cu's own checks pass.
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
	f := s.do(OpGranularity, func() *failure {
		if prop == nil {
			return argFail("nil properties")
		}
		if f := s.vmm(); f != nil {
			return f
		}
		if option != cu.MEM_ALLOC_GRANULARITY_MINIMUM && option != cu.MEM_ALLOC_GRANULARITY_RECOMMENDED {
			return fail(cu.ERROR_INVALID_VALUE, "unknown granularity option") // recorded: vmmtest granularity/bad-option, sweep/granularity-option-2
		}
		return nil
	})
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
	v, f := locked(s, OpCreate, func() (cu.MemHandle, *failure) { return s.create(size, prop, flags) })
	if f != nil {
		if prop == nil {
			return 0, f.wrap("cuMemCreate", "%d, nil, %d", size, flags)
		}
		return 0, f.wrap("cuMemCreate", "%d, %+v, %d", size, *prop, flags)
	}
	return v, nil
}

func (s *Sim) create(size uint64, prop *cu.MemAllocationProp, flags uint64) (cu.MemHandle, *failure) {
	if prop == nil {
		return 0, argFail("nil properties")
	}
	if f := s.vmm(); f != nil {
		return 0, f
	}
	p, dev, f := s.checkProp(size, *prop, flags)
	if f != nil {
		return 0, f
	}
	c := s.memOf(dev)
	if n := c.committed + size; n < size || (c.limit != 0 || c.capped) && n > c.limit {
		if dev >= 0 {
			return 0, fail(cu.ERROR_OUT_OF_MEMORY, "device memory exhausted") // recorded: vmmtest create/larger-than-device, sweep/create-1TiB
		}
		return 0, fail(cu.ERROR_OUT_OF_MEMORY, "host memory capacity exhausted")
	}
	m := s.sparePhys.get()
	m.size, m.prop, m.dev, m.counted = size, p, dev, true
	m.users = 1 // the handle's reference
	if p.RequestedHandleTypes&(cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR|cu.MEM_HANDLE_TYPE_FABRIC) != 0 {
		if f := s.shareable(m); f != nil {
			return 0, f
		}
	} else {
		m.st = &m.heap
	}
	c.committed += size
	return s.newHandle(m, nil, p).value, nil
}

// memOf returns the capacity of device dev, or of the host for -1.
func (s *Sim) memOf(dev int) *capacity {
	if dev >= 0 {
		return &s.devMem[dev]
	}
	return &s.hostMem
}

// Release is cuMemRelease. Memory stays alive while it is mapped or bound.
func (s *Sim) Release(v cu.MemHandle) error {
	f := s.do(OpRelease, func() *failure {
		h := s.lookup(v)
		if h == nil {
			return fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
		}
		s.release(h)
		return nil
	})
	if f != nil {
		return f.wrap("cuMemRelease", "%v", v)
	}
	return nil
}

// Retain is cuMemRetainAllocationHandle: the handle a mapping was made through, with one
// more reference.
//
// Recorded: any address inside the mapping works, and it returns the very value used to
// map even after that was released.
func (s *Sim) Retain(addr cu.DevicePtr) (cu.MemHandle, error) {
	v, f := locked(s, OpRetain, func() (cu.MemHandle, *failure) {
		m := s.va.mappingAt(uint64(addr))
		if m == nil {
			return 0, fail(cu.ERROR_INVALID_VALUE, "address not mapped")
		}
		s.retain(m.h)
		return m.h.value, nil
	})
	if f != nil {
		return 0, f.wrap("cuMemRetainAllocationHandle", "%v", addr)
	}
	return v, nil
}

// Properties is cuMemGetAllocationPropertiesFromHandle.
func (s *Sim) Properties(v cu.MemHandle) (cu.MemAllocationProp, error) {
	p, f := locked(s, OpProperties, func() (cu.MemAllocationProp, *failure) {
		h := s.lookup(v)
		if h == nil {
			return cu.MemAllocationProp{}, fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
		}
		if h.mem == nil {
			return cu.MemAllocationProp{}, fail(cu.ERROR_INVALID_VALUE, "a multicast object has no allocation properties")
		}
		return h.prop, nil
	})
	if f != nil {
		return cu.MemAllocationProp{}, f.wrap("cuMemGetAllocationPropertiesFromHandle", "%v", v)
	}
	return p, nil
}

// Reserve is cuMemAddressReserve. Placement follows the vmmtest placement/ cases: first
// fit, each reservation aligned to the largest power of two not above its size up to
// Config.PlacementAlign; a free hinted range is taken wherever it lies, a hint that is
// taken is ignored.
func (s *Sim) Reserve(size, alignment uint64, hint cu.DevicePtr, flags uint64) (cu.DevicePtr, error) {
	addr, f := locked(s, OpReserve, func() (uint64, *failure) { return s.reserve(size, alignment, uint64(hint), flags) })
	if f != nil {
		return 0, f.wrap("cuMemAddressReserve", "size %d, alignment %d, hint %v, flags %d", size, alignment, hint, flags)
	}
	return cu.DevicePtr(addr), nil
}

// reserve checks, in the recorded order: size a multiple of the granularity,
// alignment 0 or a power of two (smaller ones mean the granularity) below 2^58 (and none
// from 2^45 is found), flags 0, a hint aligned and below 2^47; more than the address space
// is CUDA_ERROR_OUT_OF_MEMORY.
func (s *Sim) reserve(size, alignment, hint, flags uint64) (uint64, *failure) {
	unit := s.va.unit
	switch {
	case size == 0 || size%unit != 0:
		return 0, fail(cu.ERROR_INVALID_VALUE, "size is not a positive multiple of the granularity")
	case alignment != 0 && !isPow2(alignment):
		return 0, fail(cu.ERROR_INVALID_VALUE, "alignment is not a power of two")
	case alignment >= 1<<58:
		return 0, fail(cu.ERROR_INVALID_VALUE, "alignment of 2^58 or more") // recorded: vmmtest reserve/alignment-2^40-2^63
	case alignment >= 1<<45:
		return 0, fail(cu.ERROR_OUT_OF_MEMORY, "no range aligned to 2^45 or more") // recorded: vmmtest reserve/alignment-2^40-2^63
	case flags != 0:
		return 0, fail(cu.ERROR_INVALID_VALUE, "flags must be 0")
	case hint%unit != 0:
		return 0, fail(cu.ERROR_INVALID_VALUE, "hint is not aligned to the granularity")
	case hint >= 1<<47:
		return 0, fail(cu.ERROR_OUT_OF_MEMORY, "hint above the 47-bit address space") // recorded: vmmtest placement/hint-above-47-bits
	}
	hintAlign := max(alignment, unit)
	align := max(hintAlign, min(1<<(bits.Len64(size)-1), s.cfg.PlacementAlign))
	var addr uint64
	if !s.cfg.RefuseHints || hint == 0 {
		addr = s.va.reserve(size, align, hintAlign, hint)
	} else {
		// A refused hint where first fit lands anyway gives the next range first fit would
		// find, found without reserving the hint's range first: a mapping already running
		// into it (one may run past its own reservation) would keep it from being freed.
		addr = s.va.firstFit(size, align, hint)
	}
	if addr == 0 {
		return 0, fail(cu.ERROR_OUT_OF_MEMORY, "virtual address space exhausted")
	}
	return addr, nil
}

// Free is cuMemAddressFree. Recorded: ptr and size must be exactly one reservation (not
// part of one, not two adjacent ones), with nothing mapped in it.
func (s *Sim) Free(ptr cu.DevicePtr, size uint64) error {
	f := s.do(OpFree, func() *failure {
		if why := s.va.unreserve(uint64(ptr), size); why != "" {
			return fail(cu.ERROR_INVALID_VALUE, why)
		}
		return nil
	})
	if f != nil {
		return f.wrap("cuMemAddressFree", "%v, %d", ptr, size)
	}
	return nil
}

// sizeAndGranularity returns the size of what h holds and the granularity a mapping of it
// is aligned to.
func (h *handle) sizeAndGranularity(s *Sim) (size, gran uint64) {
	if h.mem != nil {
		return h.mem.size, s.granularityOf(h.mem.prop.Location, false)
	}
	return h.mc.prop.Size, s.cfg.MulticastGranularity
}

// Map is cuMemMap. A mapping starts with no access for anyone.
func (s *Sim) Map(ptr cu.DevicePtr, size, offset uint64, v cu.MemHandle, flags uint64) error {
	if f := s.do(OpMap, func() *failure { return s.mapRange(uint64(ptr), size, offset, v, flags) }); f != nil {
		return f.wrap("cuMemMap", "%v, %d, offset %d, %v, flags %d", ptr, size, offset, v, flags)
	}
	return nil
}

// mapRange checks, in the recorded order: size 0 and flags are CUDA_ERROR_INVALID_VALUE; a
// nonzero offset, or a size other than the allocation's, CUDA_ERROR_NOT_SUPPORTED (the
// driver maps whole allocations only); a misaligned address, an address outside any
// reservation or a range overlapping a mapping CUDA_ERROR_INVALID_VALUE. Only the start
// must be reserved (see vaSpace.covered).
func (s *Sim) mapRange(ptr, size, offset uint64, v cu.MemHandle, flags uint64) *failure {
	h := s.lookup(v)
	switch {
	case h == nil:
		return fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
	case size == 0:
		return fail(cu.ERROR_INVALID_VALUE, "size 0")
	case flags != 0:
		return fail(cu.ERROR_INVALID_VALUE, "flags must be 0")
	case h.mc != nil && !h.mc.teamComplete():
		return fail(resTeamIncomplete, "not every device of the team has been added")
	}
	hsize, gran := h.sizeAndGranularity(s)
	switch {
	case offset != 0:
		return fail(cu.ERROR_NOT_SUPPORTED, "offset must be 0")
	case size != hsize:
		return fail(cu.ERROR_NOT_SUPPORTED, "only whole allocations can be mapped")
	case ptr%gran != 0:
		return fail(cu.ERROR_INVALID_VALUE, "address not aligned to the granularity")
	case !s.va.covered(ptr, size):
		return fail(cu.ERROR_INVALID_VALUE, "range not reserved")
	case ptr+size > s.va.end:
		return fail(cu.ERROR_INVALID_VALUE, "range runs past the end of the address space")
	case s.va.anyMapped(ptr, size):
		return fail(cu.ERROR_INVALID_VALUE, "range already mapped")
	}
	s.va.addMapping(ptr, size, h, len(s.cfg.Devices))
	h.maps++
	if h.mem != nil {
		h.mem.users++
	}
	return nil
}

// Unmap is cuMemUnmap.
func (s *Sim) Unmap(ptr cu.DevicePtr, size uint64) error {
	if f := s.do(OpUnmap, func() *failure { return s.unmap(uint64(ptr), size) }); f != nil {
		return f.wrap("cuMemUnmap", "%v, %d", ptr, size)
	}
	return nil
}

// unmap checks, as recorded: the range must not be empty and must start in a
// reservation; every mapping it touches must lie wholly inside it (it can hold several,
// and unmapped gaps, which are no-ops, and need not be aligned otherwise); anything else is
// CUDA_ERROR_INVALID_VALUE.
func (s *Sim) unmap(ptr, size uint64) *failure {
	if size == 0 {
		return fail(cu.ERROR_INVALID_VALUE, "size 0")
	}
	if !s.va.covered(ptr, size) {
		return fail(cu.ERROR_INVALID_VALUE, "range not reserved")
	}
	var buf [4]*mapping
	victims, ok := s.va.whole(ptr, size, buf[:])
	if !ok {
		return fail(cu.ERROR_INVALID_VALUE, "range splits a mapping")
	}
	for _, m := range victims {
		h := m.h
		s.va.maps.Delete(m.base)
		s.unmapped(h)
	}
	return nil
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

// SetAccess is cuMemSetAccess.
func (s *Sim) SetAccess(ptr cu.DevicePtr, size uint64, desc []cu.MemAccessDesc) error {
	if f := s.do(OpSetAccess, func() *failure { return s.setAccess(uint64(ptr), size, desc) }); f != nil {
		return f.wrap("cuMemSetAccess", "%v, %d, %+v", ptr, size, desc)
	}
	return nil
}

// setAccess checks, as recorded: the range must start at the start of a mapping and
// end at the end of one, splitting none; gaps between mappings are allowed. Descriptors
// apply in order, all or nothing.
func (s *Sim) setAccess(ptr, size uint64, desc []cu.MemAccessDesc) *failure {
	if len(desc) == 0 {
		return argFail("no access descriptors")
	}
	if f := s.vmm(); f != nil {
		return f
	}
	if size == 0 {
		return fail(cu.ERROR_INVALID_VALUE, "size 0")
	}
	for _, d := range desc {
		if f := s.checkDesc(d); f != nil {
			return f
		}
	}
	if ptr+size < ptr {
		return fail(cu.ERROR_INVALID_VALUE, "range overflows")
	}
	var buf [4]*mapping
	ms, whole := s.va.whole(ptr, size, buf[:])
	switch {
	case len(ms) == 0 || ms[0].base != ptr || ms[len(ms)-1].end() != ptr+size:
		return fail(cu.ERROR_INVALID_VALUE, "range does not start and end with whole mappings")
	case !whole:
		return fail(cu.ERROR_INVALID_VALUE, "range splits a mapping")
	}
	for _, m := range ms {
		for _, d := range desc {
			if d.Flags != cu.MEM_ACCESS_FLAGS_PROT_NONE && !s.canAccess(int(d.Location.ID), m.device()) {
				return fail(resNoPeer, "device has no peer access to the memory's device")
			}
		}
	}
	for _, m := range ms {
		for _, d := range desc {
			m.access[d.Location.ID] = d.Flags
		}
	}
	return nil
}

// GetAccess is cuMemGetAccess.
func (s *Sim) GetAccess(loc cu.MemLocation, ptr cu.DevicePtr) (cu.MemAccessFlags, error) {
	a, f := locked(s, OpGetAccess, func() (cu.MemAccessFlags, *failure) { return s.getAccess(loc, uint64(ptr)) })
	if f != nil {
		return 0, f.wrap("cuMemGetAccess", "%+v, %v", loc, ptr)
	}
	return a, nil
}

// getAccess answers as recorded: a location that is not a device, the host or a host
// NUMA node, or a device that does not exist, is CUDA_ERROR_INVALID_DEVICE; an address in
// no mapping CUDA_ERROR_INVALID_VALUE. The host reads the owning device's access (any host
// ID); a host NUMA node reads no access.
func (s *Sim) getAccess(loc cu.MemLocation, ptr uint64) (cu.MemAccessFlags, *failure) {
	switch loc.Type {
	case cu.MEM_LOCATION_TYPE_DEVICE:
		if loc.ID < 0 || int(loc.ID) >= len(s.cfg.Devices) {
			return 0, fail(cu.ERROR_INVALID_DEVICE, "no such device")
		}
	case cu.MEM_LOCATION_TYPE_HOST, cu.MEM_LOCATION_TYPE_HOST_NUMA:
	default:
		return 0, fail(cu.ERROR_INVALID_DEVICE, "invalid location type")
	}
	m := s.va.mappingAt(ptr)
	if m == nil {
		return 0, fail(cu.ERROR_INVALID_VALUE, "address not mapped")
	}
	switch loc.Type {
	case cu.MEM_LOCATION_TYPE_DEVICE:
		return m.access[loc.ID], nil
	case cu.MEM_LOCATION_TYPE_HOST:
		if o := m.device(); o >= 0 {
			return m.access[o], nil
		}
	}
	return cu.MEM_ACCESS_FLAGS_PROT_NONE, nil
}

// AddressRange is cuMemGetAddressRange. It answers as recorded (with a current context):
// the base and size of the mapping holding ptr; CUDA_ERROR_NOT_FOUND for an address in no
// mapping or in one no device may access.
func (s *Sim) AddressRange(ptr cu.DevicePtr) (cu.DevicePtr, uint64, error) {
	var base, size uint64
	f := s.do(OpAddressRange, func() *failure {
		m := s.va.mappingAt(uint64(ptr))
		if m == nil {
			return fail(resNotFound, "address not mapped")
		}
		if !slices.ContainsFunc(m.access, func(a cu.MemAccessFlags) bool { return a != cu.MEM_ACCESS_FLAGS_PROT_NONE }) {
			return fail(resNotFound, "no device may access the mapping")
		}
		base, size = m.base, m.size
		return nil
	})
	if f != nil {
		return 0, 0, f.wrap("cuMemGetAddressRange", "%v", ptr)
	}
	return cu.DevicePtr(base), size, nil
}
