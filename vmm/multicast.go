package vmm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/loader"
)

// Multicast is a multicast object (NVLink SHARP): one range of memory, bound on each of its
// devices to memory of that device, that a kernel writes once to reach them all. Make one
// with CreateMulticast, AddDevice every device before binding any memory, Bind the memory
// of each device, and map the object into a reservation (MapMulticast) for kernels to use.
// Close unbinds what is still bound and releases the object. Its methods are safe for
// concurrent use. Only a Manager makes one: a nil or zero Multicast fails every call with
// ErrInvalid.
//
// Creating a multicast object touches the NVSwitch fabric of the whole host: cuvmm's own
// tests create them only on sim, and on hardware only behind an explicit opt-in.
type Multicast struct {
	m    *Manager
	h    cu.MemHandle
	size uint64
	l    life

	// mu is held across each bind and unbind and the change to binds it makes, so that
	// binds is what the driver holds: a bind recorded after an unbind of the same range
	// ran in between would leave Close a binding to unbind that is gone.
	mu    sync.Mutex
	binds []binding // what Close must unbind

	// binds13 says which bind calls the backend has: 0 not known yet (see Multicast.v2).
	binds13 atomic.Int32
}

type binding struct {
	dev       int
	off, size uint64
}

// MulticastProps describe a multicast object to create.
type MulticastProps struct {
	// Devices is how many devices will be added.
	Devices int
	// Size is the object's size, a multiple of MulticastGranularity.
	Size uint64
	// HandleTypes are the shareable handle kinds the object may be exported as.
	HandleTypes cu.MemHandleType
}

func (p MulticastProps) driver() cu.MulticastObjectProp {
	n := uint32(0)
	if p.Devices > 0 && p.Devices <= 1<<16 {
		n = uint32(p.Devices)
	}
	return cu.MulticastObjectProp{NumDevices: n, Size: p.Size, HandleTypes: uint64(p.HandleTypes)}
}

func (p MulticastProps) args() string {
	return units.Size(p.Size) + " over " + strconv.Itoa(p.Devices) + " devices"
}

// MulticastGranularity returns the minimum (or recommended) size and alignment of
// multicast objects with props p.
func (m *Manager) MulticastGranularity(p MulticastProps, recommended bool) (uint64, error) {
	opt := cu.MULTICAST_GRANULARITY_MINIMUM
	if recommended {
		opt = cu.MULTICAST_GRANULARITY_RECOMMENDED
	}
	d := p.driver()
	g, err := call(m, func(b Backend) (uint64, error) { return b.MulticastGranularity(&d, opt) })
	if err != nil {
		return g, &Error{Op: "multicast granularity", Args: p.args(), Err: err}
	}
	return g, nil
}

// CreateMulticast creates a multicast object.
func (m *Manager) CreateMulticast(p MulticastProps) (*Multicast, error) {
	if !m.usable() {
		return nil, &Error{Op: "create multicast", Args: p.args(), Err: errNoBackend}
	}
	if p.Devices <= 0 || p.Devices > 1<<16 {
		return nil, &Error{Op: "create multicast", Args: p.args(), Err: invalid("device count out of range")}
	}
	d := p.driver()
	h, err := m.b.MulticastCreate(&d)
	if err != nil {
		return nil, &Error{Op: "create multicast", Args: p.args(), Err: err}
	}
	return &Multicast{m: m, h: h, size: p.Size}, nil
}

var errNoMulticast = invalid("a nil or zero Multicast (make one with Manager.CreateMulticast)")

// Handle is the backend's handle value (0 for a nil Multicast).
func (mc *Multicast) Handle() cu.MemHandle {
	if mc == nil {
		return 0
	}
	return mc.h
}

// Size is the object's size in bytes (0 for a nil Multicast).
func (mc *Multicast) Size() uint64 {
	if mc == nil {
		return 0
	}
	return mc.size
}

func (mc *Multicast) enter() error {
	if mc == nil || !mc.m.usable() {
		return errNoMulticast
	}
	return mc.l.enter()
}

// AddDevice adds device dev to the object. Every device must be added before memory is
// bound.
func (mc *Multicast) AddDevice(dev int) error {
	if err := mc.enter(); err != nil {
		return opErr(err, "multicast add device", "%v device %d", mc.Handle(), dev)
	}
	defer mc.l.exit()
	if err := mc.m.b.MulticastAddDevice(mc.h, dev); err != nil {
		return opErr(err, "multicast add device", "%v device %d", mc.h, dev)
	}
	return nil
}

// Bind binds size bytes of a, from memOffset, at offset off of the object, for the device
// that owns a, which must be device memory (host memory needs BindFor, which names the
// device). It uses cuMulticastBindMem_v2 where the driver has it (CUDA 13.1), and
// cuMulticastBindMem otherwise.
func (mc *Multicast) Bind(off uint64, a *Allocation, memOffset, size uint64) error {
	return mc.bind(false, 0, off, a, memOffset, size)
}

// BindFor binds size bytes of a, from memOffset, at offset off of the object, for device
// dev: memory of dev, or host NUMA memory of the node closest to dev (its HOST_NUMA_ID).
// Binding host memory takes cuMulticastBindMem_v2 (CUDA 13.1): with an older driver it fails
// with an error matching ErrUnsupported (and cu.ERROR_NOT_SUPPORTED) that says so. Device
// memory is bound with the 13.0 call where the driver has no other.
func (mc *Multicast) BindFor(dev int, off uint64, a *Allocation, memOffset, size uint64) error {
	return mc.bind(true, dev, off, a, memOffset, size)
}

// bind is Bind (named false: for the memory's device) and BindFor.
func (mc *Multicast) bind(named bool, dev int, off uint64, a *Allocation, memOffset, size uint64) error {
	args := func() string {
		s := units.Size(size) + " of " + a.Handle().String() + " at offset " + units.Size(off)
		if named {
			s += " for device " + strconv.Itoa(dev)
		}
		return s
	}
	if err := mc.enter(); err != nil {
		return &Error{Op: "multicast bind", Args: args(), Err: err}
	}
	defer mc.l.exit()
	if err := a.enter(); err != nil {
		return &Error{Op: "multicast bind", Args: args(), Err: err}
	}
	defer a.l.exit()
	if mc.m.foreign(a.m) {
		return &Error{Op: "multicast bind", Args: args(), Err: errForeign}
	}
	p, err := mc.m.b.Properties(a.h)
	if err != nil {
		return &Error{Op: "multicast bind", Args: args(), Err: err}
	}
	device := p.Location.Type == cu.MEM_LOCATION_TYPE_DEVICE
	switch {
	case !named && !device:
		return &Error{Op: "multicast bind", Args: args(), Err: invalid(p.Location.String() + " memory: name the device it is bound for with BindFor")}
	case !named:
		dev = int(p.Location.ID)
	case dev < 0:
		return &Error{Op: "multicast bind", Args: args(), Err: invalid("no device " + strconv.Itoa(dev))}
	case device && int(p.Location.ID) != dev:
		return &Error{Op: "multicast bind", Args: args(), Err: invalid("memory of " + p.Location.String() + " is bound only for that device")}
	}
	if err := mc.record(dev, off, size, func() error { return mc.bindMem(dev, off, a.h, memOffset, size, device) }); err != nil {
		return &Error{Op: "multicast bind", Args: args(), Err: err}
	}
	a.shared.Store(true) // other devices reach it through the object
	return nil
}

// BindAddress binds the size bytes mapped at device address addr at offset off of the
// object, for device dev: memory of dev, or (CUDA 13.1) host NUMA memory of the node
// closest to dev. It uses cuMulticastBindAddr_v2 where the driver has it and
// cuMulticastBindAddr otherwise, which takes the device from the memory: there dev must be
// the memory's device (ErrInvalid otherwise), and where it fails on host memory, the error
// matches ErrUnsupported and says that only the 13.1 call binds it.
func (mc *Multicast) BindAddress(off uint64, addr cu.DevicePtr, dev int, size uint64) error {
	args := func() string {
		return rangeArgs(addr, size) + " at offset " + units.Size(off) + " for device " + strconv.Itoa(dev)
	}
	if err := mc.enter(); err != nil {
		return &Error{Op: "multicast bind", Args: args(), Err: err}
	}
	defer mc.l.exit()
	if err := mc.record(dev, off, size, func() error { return mc.bindAddr(dev, off, addr, size) }); err != nil {
		return &Error{Op: "multicast bind", Args: args(), Err: err}
	}
	return nil
}

// record makes a bind for dev at [off, off+size) and records it.
func (mc *Multicast) record(dev int, off, size uint64, bind func() error) error {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if err := bind(); err != nil {
		return err
	}
	mc.binds = append(mc.binds, binding{dev, off, size})
	return nil
}

// Unbind unbinds the memory of device dev bound at [off, off+size) of the object: every
// binding of dev inside the range.
func (mc *Multicast) Unbind(dev int, off, size uint64) error {
	if err := mc.enter(); err != nil {
		return opErr(err, "multicast unbind", "device %d at offset %s+%s", dev, units.Size(off), units.Size(size))
	}
	defer mc.l.exit()
	return mc.unbind(binding{dev, off, size})
}

func (mc *Multicast) unbind(b binding) error {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if err := mc.m.b.MulticastUnbind(mc.h, b.dev, b.off, b.size); err != nil {
		return opErr(err, "multicast unbind", "device %d at offset %s+%s", b.dev, units.Size(b.off), units.Size(b.size))
	}
	// The driver unbound every binding of the device in the range. One record may be
	// several of them (a BindAddress over several mappings) and one unbind may cover
	// several records: keep of each record what lies outside the range.
	end := b.off + b.size
	var kept []binding // not in place: a record split in two would overwrite the next
	for _, x := range mc.binds {
		xend := x.off + x.size
		if x.dev != b.dev || xend <= b.off || x.off >= end {
			kept = append(kept, x)
			continue
		}
		if x.off < b.off {
			kept = append(kept, binding{x.dev, x.off, b.off - x.off})
		}
		if xend > end {
			kept = append(kept, binding{x.dev, end, xend - end})
		}
	}
	mc.binds = kept
	return nil
}

// MapMulticast maps the whole of mc at offset off of r: kernels write through the mapping
// to every device's memory bound to it.
func (r *Reservation) MapMulticast(off uint64, mc *Multicast) (*Mapping, error) {
	addr := r.Base() + cu.DevicePtr(off)
	args := func() string { return rangeArgs(addr, mc.Size()) + " multicast " + mc.Handle().String() }
	if err := r.enter(off, mc.Size()); err != nil {
		return nil, &Error{Op: "map", Args: args(), Err: err}
	}
	defer r.l.exit()
	if err := mc.enter(); err != nil {
		return nil, &Error{Op: "map", Args: args(), Err: err}
	}
	defer mc.l.exit()
	if r.m.foreign(mc.m) {
		return nil, &Error{Op: "map", Args: args(), Err: errForeign}
	}
	return r.mapHandle(addr, mc.h, mc.size, args)
}

// Close unbinds what is still bound and releases the object, once the operations in
// flight on it have finished. Mappings of it stay valid until unmapped. It is idempotent.
func (mc *Multicast) Close() error {
	if mc == nil || !mc.m.usable() {
		return opErr(errNoMulticast, "release multicast", "%v", mc.Handle())
	}
	return mc.l.close(func() error {
		mc.mu.Lock()
		binds := slices.Clone(mc.binds)
		mc.mu.Unlock()
		for _, b := range binds {
			if err := mc.unbind(b); err != nil {
				return err
			}
		}
		if err := mc.m.b.Release(mc.h); err != nil {
			return opErr(err, "release multicast", "%v", mc.h)
		}
		return nil
	})
}

// Multicast binds across driver versions. CUDA 13.1 added cuMulticastBindMem_v2 and
// cuMulticastBindAddr_v2, which name the device the binding is for: for device memory that
// is the memory's own device, which the 13.0 calls infer; host NUMA memory only they can
// bind. A Multicast tries the 13.1 call first and, if the backend lacks it (an error
// matching loader.ErrNotSupported: a missing symbol, never a driver's result), remembers
// that and makes the 13.0 call from then on.

// What Multicast.binds13 holds once known.
const (
	bindsV2 = 1 // the backend has CUDA 13.1's binds
	bindsV1 = 2 // it has only 13.0's
)

// v2 makes a 13.1 call unless the backend is known to lack it. made is false where the
// backend lacks it; err is then the missing symbol's error.
func (mc *Multicast) v2(call func() error) (made bool, err error) {
	if mc.binds13.Load() == bindsV1 {
		return false, errNoV2
	}
	err = call()
	if errors.Is(err, loader.ErrNotSupported) { // a driver entry point the backend lacks
		mc.binds13.Store(bindsV1)
		return false, err
	}
	mc.binds13.Store(bindsV2)
	return true, err
}

var errNoV2 = fmt.Errorf("%w: the driver has no cuMulticastBindMem_v2 or cuMulticastBindAddr_v2", loader.ErrNotSupported)

// needsV2 is the error of binding host memory where the driver has only the 13.0 calls.
func needsV2(missing, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: binding host memory names the device it is for, which only CUDA 13.1's cuMulticastBindMem_v2 does (%w)", ErrUnsupported, missing)
	}
	return fmt.Errorf("%w: binding host memory names the device it is for, which only CUDA 13.1's cuMulticastBindAddr_v2 does (%w); cuMulticastBindAddr: %w", ErrUnsupported, missing, cause)
}

// bindMem binds memory h (device memory when device is true, host memory otherwise) for
// device dev.
func (mc *Multicast) bindMem(dev int, off uint64, h cu.MemHandle, memOffset, size uint64, device bool) error {
	made, err := mc.v2(func() error { return mc.m.b.MulticastBindMemV2(mc.h, dev, off, h, memOffset, size, 0) })
	switch {
	case made:
		return err
	case !device:
		return needsV2(err, nil)
	}
	return mc.m.b.MulticastBindMem(mc.h, off, h, memOffset, size, 0)
}

// bindAddr binds the memory mapped at addr for device dev. The 13.0 call binds for the
// memory's own device, so there dev must be that device: Unbind and Close name it.
func (mc *Multicast) bindAddr(dev int, off uint64, addr cu.DevicePtr, size uint64) error {
	made, err := mc.v2(func() error { return mc.m.b.MulticastBindAddrV2(mc.h, dev, off, addr, size, 0) })
	if made {
		return err
	}
	missing := err
	loc, err := mc.locationAt(addr)
	if err != nil {
		return err
	}
	device := loc.Type == cu.MEM_LOCATION_TYPE_DEVICE
	if device && int(loc.ID) != dev {
		return invalid("memory of " + loc.String() + " is bound only for that device")
	}
	err = mc.m.b.MulticastBindAddr(mc.h, off, addr, size, 0)
	if err != nil && !device {
		return needsV2(missing, err)
	}
	return err
}

// locationAt is where the memory mapped at addr lives.
func (mc *Multicast) locationAt(addr cu.DevicePtr) (cu.MemLocation, error) {
	h, err := mc.m.b.Retain(addr)
	if err != nil {
		return cu.MemLocation{}, err
	}
	p, err := mc.m.b.Properties(h)
	_ = mc.m.releaseRetained(h) // a refusal stays in the Manager's Pending list
	return p.Location, err
}
