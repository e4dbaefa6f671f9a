package sim

import (
	"slices"

	"github.com/cuvmm/cuvmm/cu"
)

// mcObject is a multicast object: a team of devices, and per device the memory bound to
// ranges of the object. A mapping of the object writes to every bound replica. devs and
// binds are guarded by sh, the shard of the object's handle (its only handle value).
type mcObject struct {
	prop  cu.MulticastObjectProp
	sh    *handleShard
	devs  []int
	binds []*binding
}

// binding is size bytes of mem, from memOff, bound at mcOff for device dev.
type binding struct {
	dev         int
	mcOff, size uint64
	mem         *phys
	memOff      uint64
}

func (s *Sim) multicastDevices() int {
	n := 0
	for i := range s.cfg.Devices {
		if s.cfg.Devices[i].Multicast {
			n++
		}
	}
	return n
}

// multicastMemory is the memory of the smallest multicast-capable device.
func (s *Sim) multicastMemory() uint64 {
	m := ^uint64(0)
	for i := range s.cfg.Devices {
		if d := &s.cfg.Devices[i]; d.Multicast {
			m = min(m, d.TotalMem)
		}
	}
	return m
}

func (s *Sim) noMulticast() *failure {
	if s.multicastDevices() == 0 {
		return fail(cu.ERROR_NOT_SUPPORTED, "no device supports multicast") // recorded: vmmtest sweep/multicast-granularity-min
	}
	return nil
}

// MulticastGranularity is cuMulticastGetGranularity.
func (s *Sim) MulticastGranularity(prop *cu.MulticastObjectProp, option cu.MulticastGranularityFlags) (uint64, error) {
	f := s.enter(OpMulticastGranularity)
	if f == nil && prop == nil {
		f = argFail("nil properties")
	}
	if f == nil {
		f = s.noMulticast()
	}
	if f == nil && option != cu.MULTICAST_GRANULARITY_MINIMUM && option != cu.MULTICAST_GRANULARITY_RECOMMENDED {
		f = fail(cu.ERROR_INVALID_VALUE, "unknown granularity option")
	}
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
	f := s.enter(OpMulticastCreate)
	if f == nil && prop == nil {
		f = argFail("nil properties")
	}
	if f == nil {
		f = s.noMulticast()
	}
	if f == nil {
		t := cu.MemHandleType(prop.HandleTypes)
		switch {
		case prop.NumDevices == 0 || int(prop.NumDevices) > s.multicastDevices():
			f = fail(cu.ERROR_INVALID_VALUE, "team size out of range")
		case prop.Size == 0 || prop.Size%s.cfg.MulticastGranularity != 0:
			f = fail(cu.ERROR_INVALID_VALUE, "size is not a positive multiple of the multicast granularity")
		case prop.Size > s.multicastMemory():
			// The header: size is the memory each device can bind, so no more than a device
			// has (multicast is never created on the shared GPU hosts: not recorded).
			f = fail(cu.ERROR_OUT_OF_MEMORY, "size larger than a team device's memory")
		case prop.Flags != 0:
			f = fail(cu.ERROR_INVALID_VALUE, "flags must be 0")
		case prop.HandleTypes&^uint64(knownHandleTypes) != 0:
			f = fail(cu.ERROR_INVALID_VALUE, "unknown handle type")
		case t&(cu.MEM_HANDLE_TYPE_WIN32|cu.MEM_HANDLE_TYPE_WIN32_KMT) != 0 && !s.cfg.Devices[0].Win32:
			f = fail(resBadHandleType, "handle type not supported")
		case t&cu.MEM_HANDLE_TYPE_FABRIC != 0 && !s.cfg.IMEX:
			f = fail(resFabricNoIMEX, "no IMEX channel")
		}
	}
	if f != nil {
		return 0, f.wrap("cuMulticastCreate", "%+v", prop)
	}
	s.mcs.add(1)
	return s.newHandle(nil, &mcObject{prop: *prop}, cu.MemAllocationProp{}).value, nil
}

// lookupMC returns a multicast object's handle; the caller holds sh's lock.
func lookupMC(sh *handleShard, v cu.MemHandle) (*handle, *failure) {
	h := sh.lookup(v)
	if h == nil || h.mc == nil {
		return nil, fail(cu.ERROR_INVALID_VALUE, "unknown or released multicast handle")
	}
	return h, nil
}

// lockShards locks the shards of two handles, in table order (each once): the only place
// that holds two shard locks.
func (s *Sim) lockShards(a, b cu.MemHandle) (unlock func()) {
	ia, ib := shardIndex(a), shardIndex(b)
	sa, sb := &s.handles[min(ia, ib)], &s.handles[max(ia, ib)]
	if sa == sb {
		sa.mu.Lock()
		return sa.mu.Unlock
	}
	sa.mu.Lock()
	sb.mu.Lock()
	return func() { sb.mu.Unlock(); sa.mu.Unlock() }
}

// MulticastAddDevice is cuMulticastAddDevice.
func (s *Sim) MulticastAddDevice(mc cu.MemHandle, ordinal int) error {
	f := s.enter(OpMulticastAddDevice)
	if f != nil {
		return f.wrap("cuMulticastAddDevice", "%v, device %d", mc, ordinal)
	}
	sh := s.shardOf(mc)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h, f := lookupMC(sh, mc)
	var d *Device
	if f == nil {
		d, f = s.device(ordinal)
	}
	if f == nil {
		o := h.mc
		switch {
		case !d.Multicast:
			f = fail(cu.ERROR_NOT_SUPPORTED, "device does not support multicast")
		case slices.Contains(o.devs, ordinal):
			f = fail(cu.ERROR_INVALID_VALUE, "device already in the team")
		case len(o.devs) >= int(o.prop.NumDevices):
			f = fail(cu.ERROR_INVALID_VALUE, "team already full")
		}
	}
	if f != nil {
		return f.wrap("cuMulticastAddDevice", "%v, device %d", mc, ordinal)
	}
	h.mc.devs = append(h.mc.devs, ordinal)
	return nil
}

// waitTeam refuses binding or mapping a multicast object before every device of its team
// has been added. The driver documents that such calls block until the team is complete;
// sim answers at once instead (resTeamIncomplete), because in one process a call that
// blocks on a team no other goroutine completes would hang the program for good. The
// caller holds the shard lock of h.
func (s *Sim) waitTeam(h *handle) *failure {
	if len(h.mc.devs) < int(h.mc.prop.NumDevices) {
		return fail(resTeamIncomplete, "not every device of the team has been added")
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
	b.mem.use()
	s.bindings.add(1)
}

// MulticastBindMem is cuMulticastBindMem; it blocks until the team is complete. The memory
// is bound for the device that owns it.
func (s *Sim) MulticastBindMem(mc cu.MemHandle, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error {
	if f := s.enter(OpMulticastBindMem); f != nil {
		return f.wrap("cuMulticastBindMem", "%v+%d, %v+%d, %d, flags %d", mc, mcOffset, mem, memOffset, size, flags)
	}
	return s.bindMem("cuMulticastBindMem", mc, -1, mcOffset, mem, memOffset, size, flags)
}

// bindMem binds memory by handle for device dev, or for the memory's own device with dev
// -1 (cuMulticastBindMem, which names none).
func (s *Sim) bindMem(name string, mc cu.MemHandle, dev int, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error {
	defer s.lockShards(mc, mem)()
	h, f := lookupMC(s.shardOf(mc), mc)
	var m *handle
	if f == nil {
		if m = s.shardOf(mem).lookup(mem); m == nil || m.mem == nil {
			f = fail(cu.ERROR_INVALID_VALUE, "unknown or released memory handle")
		}
	}
	if f == nil {
		f = s.waitTeam(h)
	}
	if f == nil {
		f = s.checkBind(h.mc, mcOffset, size, flags)
	}
	if f == nil && (memOffset%s.cfg.MulticastGranularity != 0 || memOffset+size > m.mem.size || memOffset+size < memOffset) {
		f = fail(cu.ERROR_INVALID_VALUE, "memory range misaligned or past the end of the allocation")
	}
	if f == nil && dev >= 0 {
		f = s.boundFor(m.mem, dev)
	}
	if f == nil {
		if dev < 0 {
			dev = m.mem.dev
		}
		f = s.bindable(h.mc, dev, mcOffset, size)
	}
	if f != nil {
		if name == "cuMulticastBindMem" {
			return f.wrap(name, "%v+%d, %v+%d, %d, flags %d", mc, mcOffset, mem, memOffset, size, flags)
		}
		return f.wrap(name, "%v+%d, device %d, %v+%d, %d, flags %d", mc, mcOffset, dev, mem, memOffset, size, flags)
	}
	s.bind(h.mc, &binding{dev: dev, mcOff: mcOffset, size: size, mem: m.mem, memOff: memOffset})
	return nil
}

// MulticastBindAddr is cuMulticastBindAddr: it binds the memory mapped at [ptr, ptr+size),
// which may span several mappings of one device's memory, for that device.
func (s *Sim) MulticastBindAddr(mc cu.MemHandle, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error {
	if f := s.enter(OpMulticastBindAddr); f != nil {
		return f.wrap("cuMulticastBindAddr", "%v+%d, %v, %d, flags %d", mc, mcOffset, ptr, size, flags)
	}
	return s.bindAddr("cuMulticastBindAddr", mc, -1, mcOffset, ptr, size, flags)
}

// bindAddr binds mapped memory for device dev, or for the memory's own device with dev -1
// (cuMulticastBindAddr, which names none).
func (s *Sim) bindAddr(name string, mc cu.MemHandle, dev int, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error {
	var hd hold
	s.va.lock(&hd, uint64(ptr), size)
	defer hd.unlock()
	sh := s.shardOf(mc)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h, f := lookupMC(sh, mc)
	if f == nil {
		f = s.waitTeam(h)
	}
	if f == nil {
		f = s.checkBind(h.mc, mcOffset, size, flags)
	}
	if f == nil && uint64(ptr)%s.cfg.MulticastGranularity != 0 {
		f = fail(cu.ERROR_INVALID_VALUE, "address not aligned to the multicast granularity")
	}
	var pieces []*binding
	// By what is left rather than up to ptr+size, which is 0 for a range that ends at the
	// top of the address space.
	for cur, left := uint64(ptr), size; f == nil && left > 0; {
		m := hd.mappingAt(cur)
		switch {
		case m == nil:
			f = fail(cu.ERROR_INVALID_VALUE, "address not mapped")
		case m.h.mem == nil || dev < 0 && m.h.mem.dev < 0:
			f = fail(cu.ERROR_INVALID_VALUE, "address does not map device memory")
		case dev < 0 && len(pieces) > 0 && pieces[0].dev != m.h.mem.dev:
			f = fail(cu.ERROR_INVALID_VALUE, "range maps memory of several devices")
		case dev >= 0:
			f = s.boundFor(m.h.mem, dev)
		}
		if f == nil {
			k := min(left, m.end()-cur)
			d := dev
			if d < 0 {
				d = m.h.mem.dev
			}
			pieces = append(pieces, &binding{dev: d, mcOff: mcOffset + (cur - uint64(ptr)), size: k, mem: m.h.mem, memOff: cur - m.base})
			cur, left = cur+k, left-k
		}
	}
	if f == nil {
		f = s.bindable(h.mc, pieces[0].dev, mcOffset, size)
	}
	if f != nil {
		if name == "cuMulticastBindAddr" {
			return f.wrap(name, "%v+%d, %v, %d, flags %d", mc, mcOffset, ptr, size, flags)
		}
		return f.wrap(name, "%v+%d, device %d, %v, %d, flags %d", mc, mcOffset, dev, ptr, size, flags)
	}
	for _, b := range pieces {
		s.bind(h.mc, b)
	}
	return nil
}

// MulticastUnbind is cuMulticastUnbind: the range must cover whole bindings of the device.
func (s *Sim) MulticastUnbind(mc cu.MemHandle, ordinal int, mcOffset, size uint64) error {
	f := s.enter(OpMulticastUnbind)
	if f != nil {
		return f.wrap("cuMulticastUnbind", "%v, device %d, %d, %d", mc, ordinal, mcOffset, size)
	}
	sh := s.shardOf(mc)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h, f := lookupMC(sh, mc)
	if f == nil {
		_, f = s.device(ordinal)
	}
	if f == nil {
		f = s.checkBind(h.mc, mcOffset, size, 0)
	}
	found := 0
	if f == nil {
		for _, b := range h.mc.binds {
			if b.dev == ordinal && b.mcOff < mcOffset+size && mcOffset < b.mcOff+b.size {
				if b.mcOff < mcOffset || b.mcOff+b.size > mcOffset+size {
					f = fail(cu.ERROR_INVALID_VALUE, "range splits a binding")
					break
				}
				found++
			}
		}
		if f == nil && found == 0 {
			f = fail(cu.ERROR_INVALID_VALUE, "nothing bound there for the device")
		}
	}
	if f != nil {
		return f.wrap("cuMulticastUnbind", "%v, device %d, %d, %d", mc, ordinal, mcOffset, size)
	}
	h.mc.binds = slices.DeleteFunc(h.mc.binds, func(b *binding) bool {
		if b.dev == ordinal && b.mcOff >= mcOffset && b.mcOff+b.size <= mcOffset+size {
			s.bindings.add(-1)
			s.unuse(b.mem)
			return true
		}
		return false
	})
	return nil
}

// freeMulticast drops a multicast object nothing refers to any more, with its bindings; the
// caller holds its shard's lock.
func (s *Sim) freeMulticast(o *mcObject) {
	for _, b := range o.binds {
		s.bindings.add(-1)
		s.unuse(b.mem)
	}
	o.binds = nil
	s.mcs.add(-1)
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

// mcWrite writes p at offset off of the object into every bound replica; unbound ranges
// drop the bytes.
func (s *Sim) mcWrite(o *mcObject, off uint64, p []byte) error {
	o.sh.mu.Lock()
	defer o.sh.mu.Unlock()
	for _, b := range o.binds {
		if from, to, mo, ok := b.overlap(off, uint64(len(p))); ok {
			if err := b.mem.st.writeAt(p[from:to], mo); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Sim) mcFill(o *mcObject, off, n uint64, v byte) error {
	o.sh.mu.Lock()
	defer o.sh.mu.Unlock()
	for _, b := range o.binds {
		if from, to, mo, ok := b.overlap(off, n); ok {
			if err := b.mem.st.fill(mo, to-from, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// mcRead reads through the object: from the replica of the reading device where it has one
// bound, else from the bound replica of the lowest device; unbound ranges read as zeros.
func (s *Sim) mcRead(o *mcObject, ordinal int, off uint64, p []byte) error {
	o.sh.mu.Lock()
	defer o.sh.mu.Unlock()
	clear(p)
	order := slices.Clone(o.binds)
	// Apply the least preferred first so the preferred replica's bytes land last.
	slices.SortStableFunc(order, func(a, b *binding) int {
		ra, rb := rank(a.dev, ordinal), rank(b.dev, ordinal)
		return rb - ra
	})
	for _, b := range order {
		if from, to, mo, ok := b.overlap(off, uint64(len(p))); ok {
			if err := b.mem.st.readAt(p[from:to], mo); err != nil {
				return err
			}
		}
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
