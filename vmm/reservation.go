package vmm

import (
	"strconv"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
)

// Reservation is a range of virtual addresses. Close unmaps whatever is still mapped in it
// and frees it. Its methods are safe for concurrent use. Only a Manager makes one: a nil or
// zero Reservation fails every call with ErrInvalid.
type Reservation struct {
	m    *Manager
	base cu.DevicePtr
	size uint64
	l    life

	mu   sync.Mutex // guards maps
	maps map[*Mapping]struct{}
}

// ReserveOption adjusts Reserve.
type ReserveOption func(*reserveOpts)

type reserveOpts struct {
	align uint64
	hint  cu.DevicePtr
}

// WithAlignment asks for an alignment larger than the granularity (a power of two).
func WithAlignment(a uint64) ReserveOption { return func(o *reserveOpts) { o.align = a } }

// At asks for a fixed address. The driver may choose another; check Base.
func At(addr cu.DevicePtr) ReserveOption { return func(o *reserveOpts) { o.hint = addr } }

// Reserve reserves size bytes (a multiple of the granularity) of virtual address space.
func (m *Manager) Reserve(size uint64, opts ...ReserveOption) (*Reservation, error) {
	var o reserveOpts
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if !m.usable() {
		return nil, opErr(errNoBackend, "reserve", "%s alignment %d hint %v", Size(size), o.align, o.hint)
	}
	va, err := m.b.Reserve(size, o.align, o.hint, 0)
	if err != nil {
		return nil, opErr(err, "reserve", "%s alignment %d hint %v", Size(size), o.align, o.hint)
	}
	return &Reservation{m: m, base: va, size: size, maps: map[*Mapping]struct{}{}}, nil
}

// Base is the first address of the reservation (0 for a nil Reservation).
func (r *Reservation) Base() cu.DevicePtr {
	if r == nil {
		return 0
	}
	return r.base
}

// Size is the reservation's size in bytes (0 for a nil Reservation).
func (r *Reservation) Size() uint64 {
	if r == nil {
		return 0
	}
	return r.size
}

var errNoReservation = invalid("a nil or zero Reservation (make one with a Manager)")

func (r *Reservation) usable() bool { return r != nil && r.m.usable() }

// Map maps size bytes of a, from allocOffset, at offset off of the reservation.
func (r *Reservation) Map(off uint64, a *Allocation, allocOffset, size uint64) (*Mapping, error) {
	addr := r.Base() + cu.DevicePtr(off)
	args := func() string {
		return addr.String() + "+" + Size(size) + " offset " + strconv.FormatUint(allocOffset, 10)
	}
	if !r.usable() {
		return nil, &Error{Op: "map", Args: args(), Err: errNoReservation}
	}
	// Both stay pinned until the mapping is recorded: a Close of the reservation waits and
	// then unmaps it, and a Close of the allocation cannot release it mid-map.
	if !r.l.enter() {
		return nil, &Error{Op: "map", Args: args(), Err: ErrClosed}
	}
	defer r.l.exit()
	if err := a.enter(); err != nil {
		return nil, &Error{Op: "map", Args: args(), Err: err}
	}
	defer a.l.exit()
	if off > r.size || size > r.size-off {
		return nil, &Error{Op: "map", Args: args(), Err: ErrOutOfRange}
	}
	if err := r.m.b.Map(addr, size, allocOffset, a.h, 0); err != nil {
		return nil, &Error{Op: "map", Args: args(), Err: err}
	}
	mp := &Mapping{r: r, addr: addr, size: size}
	r.mu.Lock()
	r.maps[mp] = struct{}{}
	r.mu.Unlock()
	return mp, nil
}

// Close unmaps every mapping still open in the reservation and frees it, once the Maps in
// flight have finished. It is idempotent.
func (r *Reservation) Close() error {
	if !r.usable() {
		return opErr(errNoReservation, "free", "%v+%s", r.Base(), Size(r.Size()))
	}
	return r.l.close(func() error {
		r.mu.Lock()
		open := make([]*Mapping, 0, len(r.maps))
		for mp := range r.maps {
			open = append(open, mp)
		}
		r.mu.Unlock()
		for _, mp := range open {
			if err := mp.Close(); err != nil {
				return err
			}
		}
		if err := r.m.b.Free(r.base, r.size); err != nil {
			return opErr(err, "free", "%v+%s", r.base, Size(r.size))
		}
		return nil
	})
}

// Mapping is a mapped range. Close unmaps it. Its methods are safe for concurrent use.
// Only a Reservation makes one: a nil or zero Mapping fails every call with ErrInvalid.
type Mapping struct {
	r    *Reservation
	addr cu.DevicePtr
	size uint64
	l    life
}

// Addr is the mapping's first address (0 for a nil Mapping).
func (mp *Mapping) Addr() cu.DevicePtr {
	if mp == nil {
		return 0
	}
	return mp.addr
}

// Size is the mapping's size (0 for a nil Mapping).
func (mp *Mapping) Size() uint64 {
	if mp == nil {
		return 0
	}
	return mp.size
}

var errNoMapping = invalid("a nil or zero Mapping (make one with Reservation.Map)")

// enter pins mp for one operation: nil when it may go on, or why not.
func (mp *Mapping) enter() error {
	if mp == nil || !mp.r.usable() {
		return errNoMapping
	}
	if !mp.l.enter() {
		return ErrClosed
	}
	return nil
}

// SetAccess sets the access of each descriptor's location to the whole mapping, in one
// driver call (see ReadWrite, ReadOnly, NoAccess).
func (mp *Mapping) SetAccess(desc ...cu.MemAccessDesc) error {
	if err := mp.enter(); err != nil {
		return opErr(err, "set access", "%v+%s", mp.Addr(), Size(mp.Size()))
	}
	defer mp.l.exit()
	if err := mp.r.m.b.SetAccess(mp.addr, mp.size, desc); err != nil {
		return opErr(err, "set access", "%v+%s %v", mp.addr, Size(mp.size), desc)
	}
	return nil
}

// Access returns the access device dev has to the mapping.
func (mp *Mapping) Access(dev int) (cu.MemAccessFlags, error) {
	if err := mp.enter(); err != nil {
		return 0, opErr(err, "get access", "%v device %d", mp.Addr(), dev)
	}
	defer mp.l.exit()
	f, err := mp.r.m.b.GetAccess(OnDevice(dev), mp.addr)
	if err != nil {
		return f, opErr(err, "get access", "%v device %d", mp.addr, dev)
	}
	return f, nil
}

// Close unmaps the mapping once the operations in flight on it have finished. It is
// idempotent.
func (mp *Mapping) Close() error {
	if mp == nil || !mp.r.usable() {
		return opErr(errNoMapping, "unmap", "%v+%s", mp.Addr(), Size(mp.Size()))
	}
	return mp.l.close(func() error {
		if err := mp.r.m.b.Unmap(mp.addr, mp.size); err != nil {
			return opErr(err, "unmap", "%v+%s", mp.addr, Size(mp.size))
		}
		mp.r.mu.Lock()
		delete(mp.r.maps, mp)
		mp.r.mu.Unlock()
		return nil
	})
}
