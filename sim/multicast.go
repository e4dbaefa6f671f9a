package sim

import (
	"slices"

	"github.com/cuvmm/cuvmm/cu"
)

// mcObject is a multicast object: a team of devices, and per device the memory bound to
// ranges of the object. A mapping of the object writes to every bound replica.
type mcObject struct {
	prop  cu.MulticastObjectProp
	devs  []int
	binds []*binding
}

// teamComplete reports whether every device of the team has been added. The driver
// documents that binding or mapping before then blocks until it is; sim refuses at once
// instead (resTeamIncomplete), because in one process a call that blocks on a team no other
// goroutine completes would hang the program for good.
func (o *mcObject) teamComplete() bool { return len(o.devs) >= int(o.prop.NumDevices) }

// binding is size bytes of mem, from memOff, bound at mcOff for device dev.
type binding struct {
	dev         int
	mcOff, size uint64
	mem         *phys
	memOff      uint64
}

// multicastDevices returns the number of multicast-capable devices and the memory of the
// smallest of them.
func (s *Sim) multicastDevices() (n int, mem uint64) {
	mem = ^uint64(0)
	for i := range s.cfg.Devices {
		if d := &s.cfg.Devices[i]; d.Multicast {
			n, mem = n+1, min(mem, d.TotalMem)
		}
	}
	return n, mem
}

func (s *Sim) noMulticast() *failure {
	if n, _ := s.multicastDevices(); n == 0 {
		return fail(cu.ERROR_NOT_SUPPORTED, "no device supports multicast") // recorded: vmmtest sweep/multicast-granularity-min
	}
	return nil
}

// MulticastGranularity is cuMulticastGetGranularity.
func (s *Sim) MulticastGranularity(prop *cu.MulticastObjectProp, option cu.MulticastGranularityFlags) (uint64, error) {
	f := s.do(OpMulticastGranularity, func() *failure {
		if prop == nil {
			return argFail("nil properties")
		}
		if f := s.noMulticast(); f != nil {
			return f
		}
		if option != cu.MULTICAST_GRANULARITY_MINIMUM && option != cu.MULTICAST_GRANULARITY_RECOMMENDED {
			return fail(cu.ERROR_INVALID_VALUE, "unknown granularity option")
		}
		return nil
	})
	if f != nil {
		return 0, f.wrap("cuMulticastGetGranularity", "%+v, %d", prop, option)
	}
	if option == cu.MULTICAST_GRANULARITY_RECOMMENDED {
		return s.cfg.MulticastRecommendedGranularity, nil
	}
	return s.cfg.MulticastGranularity, nil
}

// MulticastCreate is cuMulticastCreate.
func (s *Sim) MulticastCreate(prop *cu.MulticastObjectProp) (cu.MemHandle, error) {
	v, f := locked(s, OpMulticastCreate, func() (cu.MemHandle, *failure) { return s.multicastCreate(prop) })
	if f != nil {
		return 0, f.wrap("cuMulticastCreate", "%+v", prop)
	}
	return v, nil
}

func (s *Sim) multicastCreate(prop *cu.MulticastObjectProp) (cu.MemHandle, *failure) {
	if prop == nil {
		return 0, argFail("nil properties")
	}
	if f := s.noMulticast(); f != nil {
		return 0, f
	}
	t := cu.MemHandleType(prop.HandleTypes)
	devs, mem := s.multicastDevices()
	switch {
	case prop.NumDevices == 0 || int(prop.NumDevices) > devs:
		return 0, fail(cu.ERROR_INVALID_VALUE, "team size out of range")
	case prop.Size == 0 || prop.Size%s.cfg.MulticastGranularity != 0:
		return 0, fail(cu.ERROR_INVALID_VALUE, "size is not a positive multiple of the multicast granularity")
	case prop.Size > mem:
		// The header: size is the memory each device can bind, so no more than a device
		// has (multicast is never created on the shared GPU hosts: not recorded).
		return 0, fail(cu.ERROR_OUT_OF_MEMORY, "size larger than a team device's memory")
	case prop.Flags != 0:
		return 0, fail(cu.ERROR_INVALID_VALUE, "flags must be 0")
	case prop.HandleTypes&^uint64(knownHandleTypes) != 0:
		return 0, fail(cu.ERROR_INVALID_VALUE, "unknown handle type")
	case t&(cu.MEM_HANDLE_TYPE_WIN32|cu.MEM_HANDLE_TYPE_WIN32_KMT) != 0 && !s.cfg.Devices[0].Win32:
		return 0, fail(resBadHandleType, "handle type not supported")
	case t&cu.MEM_HANDLE_TYPE_FABRIC != 0 && !s.cfg.IMEX:
		return 0, fail(resFabricNoIMEX, "no IMEX channel")
	}
	s.mcs++
	return s.newHandle(nil, &mcObject{prop: *prop}, cu.MemAllocationProp{}).value, nil
}

// lookupMC returns a multicast object.
func (s *Sim) lookupMC(v cu.MemHandle) (*mcObject, *failure) {
	h := s.lookup(v)
	if h == nil || h.mc == nil {
		return nil, fail(cu.ERROR_INVALID_VALUE, "unknown or released multicast handle")
	}
	return h.mc, nil
}

// MulticastAddDevice is cuMulticastAddDevice.
func (s *Sim) MulticastAddDevice(mc cu.MemHandle, ordinal int) error {
	f := s.do(OpMulticastAddDevice, func() *failure {
		o, f := s.lookupMC(mc)
		if f != nil {
			return f
		}
		d, f := s.device(ordinal)
		switch {
		case f != nil:
			return f
		case !d.Multicast:
			return fail(cu.ERROR_NOT_SUPPORTED, "device does not support multicast")
		case slices.Contains(o.devs, ordinal):
			return fail(cu.ERROR_INVALID_VALUE, "device already in the team")
		case o.teamComplete():
			return fail(cu.ERROR_INVALID_VALUE, "team already full")
		}
		o.devs = append(o.devs, ordinal)
		return nil
	})
	if f != nil {
		return f.wrap("cuMulticastAddDevice", "%v, device %d", mc, ordinal)
	}
	return nil
}

// checkBind validates the common arguments of the bind calls.
func (s *Sim) checkBind(o *mcObject, mcOffset, size, flags uint64) *failure {
	g := s.cfg.MulticastGranularity
	switch {
	case flags != 0:
		return fail(cu.ERROR_INVALID_VALUE, "flags must be 0")
	case size == 0 || size%g != 0 || mcOffset%g != 0:
		return fail(cu.ERROR_INVALID_VALUE, "offset or size not a multiple of the multicast granularity")
	case mcOffset+size > o.prop.Size || mcOffset+size < mcOffset:
		return fail(cu.ERROR_INVALID_VALUE, "range past the end of the multicast object")
	}
	return nil
}

// bindable checks that device dev may bind [mcOffset, mcOffset+size).
func (s *Sim) bindable(o *mcObject, dev int, mcOffset, size uint64) *failure {
	if !slices.Contains(o.devs, dev) {
		return fail(cu.ERROR_INVALID_DEVICE, "memory's device is not in the team")
	}
	for _, b := range o.binds {
		if b.dev == dev && b.mcOff < mcOffset+size && mcOffset < b.mcOff+b.size {
			return fail(cu.ERROR_INVALID_VALUE, "range already bound for the device")
		}
	}
	return nil
}

func (s *Sim) bind(o *mcObject, b *binding) {
	o.binds = append(o.binds, b)
	b.mem.users++
	s.bindings++
}

// MulticastBindMem is cuMulticastBindMem; it blocks until the team is complete. The memory
// is bound for the device that owns it.
func (s *Sim) MulticastBindMem(mc cu.MemHandle, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error {
	if f := s.do(OpMulticastBindMem, func() *failure { return s.bindMem(mc, -1, mcOffset, mem, memOffset, size, flags) }); f != nil {
		return f.wrap("cuMulticastBindMem", "%v+%d, %v+%d, %d, flags %d", mc, mcOffset, mem, memOffset, size, flags)
	}
	return nil
}

// bindMem binds memory by handle for device dev, or for the memory's own device with
// dev -1 (cuMulticastBindMem, which names none).
func (s *Sim) bindMem(mc cu.MemHandle, dev int, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) *failure {
	o, f := s.lookupMC(mc)
	if f != nil {
		return f
	}
	m := s.lookup(mem)
	switch {
	case m == nil || m.mem == nil:
		return fail(cu.ERROR_INVALID_VALUE, "unknown or released memory handle")
	case !o.teamComplete():
		return fail(resTeamIncomplete, "not every device of the team has been added")
	}
	if f := s.checkBind(o, mcOffset, size, flags); f != nil {
		return f
	}
	if memOffset%s.cfg.MulticastGranularity != 0 || memOffset+size > m.mem.size || memOffset+size < memOffset {
		return fail(cu.ERROR_INVALID_VALUE, "memory range misaligned or past the end of the allocation")
	}
	dev, f = s.boundFor(m.mem, dev)
	if f != nil {
		return f
	}
	if f := s.bindable(o, dev, mcOffset, size); f != nil {
		return f
	}
	s.bind(o, &binding{dev: dev, mcOff: mcOffset, size: size, mem: m.mem, memOff: memOffset})
	return nil
}

// MulticastBindAddr is cuMulticastBindAddr: it binds the memory mapped at [ptr, ptr+size),
// which may span several mappings of one device's memory, for that device.
func (s *Sim) MulticastBindAddr(mc cu.MemHandle, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error {
	if f := s.do(OpMulticastBindAddr, func() *failure { return s.bindAddr(mc, -1, mcOffset, uint64(ptr), size, flags) }); f != nil {
		return f.wrap("cuMulticastBindAddr", "%v+%d, %v, %d, flags %d", mc, mcOffset, ptr, size, flags)
	}
	return nil
}

// bindAddr binds mapped memory for device dev, or for the memory's own device with
// dev -1 (cuMulticastBindAddr, which names none).
func (s *Sim) bindAddr(mc cu.MemHandle, dev int, mcOffset, ptr, size, flags uint64) *failure {
	o, f := s.lookupMC(mc)
	if f != nil {
		return f
	}
	if !o.teamComplete() {
		return fail(resTeamIncomplete, "not every device of the team has been added")
	}
	if f := s.checkBind(o, mcOffset, size, flags); f != nil {
		return f
	}
	if ptr%s.cfg.MulticastGranularity != 0 {
		return fail(cu.ERROR_INVALID_VALUE, "address not aligned to the multicast granularity")
	}
	var pieces []*binding
	// By what is left rather than up to ptr+size, which is 0 for a range that ends at the
	// top of the address space.
	for cur, left := ptr, size; left > 0; {
		m := s.va.mappingAt(cur)
		switch {
		case m == nil:
			return fail(cu.ERROR_INVALID_VALUE, "address not mapped")
		case m.h.mem == nil || dev < 0 && m.h.mem.dev < 0:
			return fail(cu.ERROR_INVALID_VALUE, "address does not map device memory")
		case dev < 0 && len(pieces) > 0 && pieces[0].dev != m.h.mem.dev:
			return fail(cu.ERROR_INVALID_VALUE, "range maps memory of several devices")
		}
		d, f := s.boundFor(m.h.mem, dev)
		if f != nil {
			return f
		}
		k := min(left, m.end()-cur)
		pieces = append(pieces, &binding{dev: d, mcOff: mcOffset + (cur - ptr), size: k, mem: m.h.mem, memOff: cur - m.base})
		cur, left = cur+k, left-k
	}
	if f := s.bindable(o, pieces[0].dev, mcOffset, size); f != nil {
		return f
	}
	for _, b := range pieces {
		s.bind(o, b)
	}
	return nil
}

// MulticastUnbind is cuMulticastUnbind: the range must cover whole bindings of the device.
func (s *Sim) MulticastUnbind(mc cu.MemHandle, ordinal int, mcOffset, size uint64) error {
	if f := s.do(OpMulticastUnbind, func() *failure { return s.unbind(mc, ordinal, mcOffset, size) }); f != nil {
		return f.wrap("cuMulticastUnbind", "%v, device %d, %d, %d", mc, ordinal, mcOffset, size)
	}
	return nil
}

func (s *Sim) unbind(mc cu.MemHandle, ordinal int, mcOffset, size uint64) *failure {
	o, f := s.lookupMC(mc)
	if f != nil {
		return f
	}
	if _, f := s.device(ordinal); f != nil {
		return f
	}
	if f := s.checkBind(o, mcOffset, size, 0); f != nil {
		return f
	}
	found := 0
	for _, b := range o.binds {
		if b.dev == ordinal && b.mcOff < mcOffset+size && mcOffset < b.mcOff+b.size {
			if b.mcOff < mcOffset || b.mcOff+b.size > mcOffset+size {
				return fail(cu.ERROR_INVALID_VALUE, "range splits a binding")
			}
			found++
		}
	}
	if found == 0 {
		return fail(cu.ERROR_INVALID_VALUE, "nothing bound there for the device")
	}
	o.binds = slices.DeleteFunc(o.binds, func(b *binding) bool {
		if b.dev == ordinal && b.mcOff >= mcOffset && b.mcOff+b.size <= mcOffset+size {
			s.bindings--
			s.unuse(b.mem)
			return true
		}
		return false
	})
	return nil
}

// freeMulticast drops a multicast object nothing refers to any more, with its bindings.
func (s *Sim) freeMulticast(o *mcObject) {
	for _, b := range o.binds {
		s.bindings--
		s.unuse(b.mem)
	}
	o.binds = nil
	s.mcs--
}

// overlap returns the part of binding b inside [off, off+n) as offsets into that range and
// into b's memory, or ok false.
func (b *binding) overlap(off, n uint64) (from, to, memOff uint64, ok bool) {
	lo, hi := max(off, b.mcOff), min(off+n, b.mcOff+b.size)
	if lo >= hi {
		return 0, 0, 0, false
	}
	return lo - off, hi - off, b.memOff + (lo - b.mcOff), true
}
