package vmm

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
)

// Reservation is a range of virtual addresses. Close unmaps whatever is still mapped in it
// and frees it. Its methods are safe for concurrent use: maps of different ranges, and
// operations on different mappings, run in parallel. Reservation.Unmap and
// Reservation.ExportDmaBuf serialize with the reservation's maps and Mapping.Close calls,
// wherever they are in it: each waits for those in flight and holds new ones back until its
// driver call returns, so that a range unmapped in one call cannot lose a mapping made
// inside it meanwhile, and a dma-buf describes the memory its descriptor holds. Only a
// Manager makes one: a nil or zero Reservation fails every call with ErrInvalid.
type Reservation struct {
	m    *Manager
	base cu.DevicePtr
	size uint64
	l    life

	// ranges is held shared by Map and Mapping.Close and exclusively by Unmap and
	// ExportDmaBuf: why is in the type's doc.
	ranges sync.RWMutex
	mu     sync.Mutex // guards maps
	maps   []*Mapping // open mappings, by address
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
	o := options(opts)
	va, err := call(m, func(b Backend) (cu.DevicePtr, error) {
		_ = m.orphans.Retry() // what is refused again stays listed; Pending says it
		return b.Reserve(size, o.align, o.hint, 0)
	})
	if err != nil {
		return nil, opErr(err, "reserve", "%s alignment %d hint %v", units.Size(size), o.align, o.hint)
	}
	return &Reservation{m: m, base: va, size: size}, nil
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

// Contains reports whether the n bytes at addr lie in the reservation.
func (r *Reservation) Contains(addr cu.DevicePtr, n uint64) bool {
	off := uint64(addr - r.Base())
	return addr >= r.Base() && off <= r.Size() && n <= r.Size()-off
}

var errNoReservation = invalid("a nil or zero Reservation (make one with a Manager)")

func (r *Reservation) usable() bool { return r != nil && r.m.usable() }

// enter pins r for one operation on [off, off+size): nil when it may go on, or why not.
func (r *Reservation) enter(off, size uint64) error {
	if !r.usable() {
		return errNoReservation
	}
	if err := r.l.enter(); err != nil {
		return err
	}
	if off > r.size || size > r.size-off {
		r.l.exit()
		return ErrOutOfRange
	}
	return nil
}

func rangeArgs(addr cu.DevicePtr, size uint64) string { return addr.String() + "+" + units.Size(size) }

// rangeErr is err, unless nil, naming op and the range it worked on.
func rangeErr(err error, op string, addr cu.DevicePtr, size uint64) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Args: rangeArgs(addr, size), Err: err}
}

// Map maps the whole of a at offset off of the reservation (the driver maps whole
// allocations only).
func (r *Reservation) Map(off uint64, a *Allocation) (*Mapping, error) {
	if err := a.enter(); err != nil {
		return nil, &Error{Op: "map", Args: rangeArgs(r.Base()+cu.DevicePtr(off), a.Size()), Err: err}
	}
	defer a.l.exit()
	return r.mapPinned(off, a)
}

// mapPinned is Map of a, which the caller keeps pinned (Region.Swap pins it before it
// unmaps what a replaces, which a Close of a begun meanwhile would otherwise leave empty).
func (r *Reservation) mapPinned(off uint64, a *Allocation) (*Mapping, error) {
	size := a.Size()
	addr := r.Base() + cu.DevicePtr(off)
	args := func() string { return rangeArgs(addr, size) }
	// Pinned until the mapping is recorded: a Close of the reservation waits and then
	// unmaps it, and a Close of the allocation cannot release it mid-map.
	if err := r.enter(off, size); err != nil {
		return nil, &Error{Op: "map", Args: args(), Err: err}
	}
	defer r.l.exit()
	if size == 0 {
		return nil, &Error{Op: "map", Args: args(), Err: invalid("an allocation of unknown size")}
	}
	if r.m.foreign(a.m) {
		return nil, &Error{Op: "map", Args: args(), Err: errForeign}
	}
	mp, err := r.mapHandle(addr, a.h, size, args)
	if mp != nil {
		mp.a = a
	}
	return mp, err
}

// mapHandle maps h, which the caller keeps pinned, and records the mapping.
func (r *Reservation) mapHandle(addr cu.DevicePtr, h cu.MemHandle, size uint64, args func() string) (*Mapping, error) {
	r.ranges.RLock()
	defer r.ranges.RUnlock()
	if err := r.m.b.Map(addr, size, 0, h, 0); err != nil {
		return nil, &Error{Op: "map", Args: args(), Err: err}
	}
	mp := &Mapping{r: r, addr: addr, size: size}
	r.mu.Lock()
	i, _ := slices.BinarySearchFunc(r.maps, addr, byAddr)
	r.maps = slices.Insert(r.maps, i, mp)
	r.mu.Unlock()
	return mp, nil
}

func byAddr(mp *Mapping, addr cu.DevicePtr) int { return cmp.Compare(mp.addr, addr) }

// SetAccess sets the access of each descriptor's location to the size bytes at offset off,
// in one driver call: the range must start and end with whole mappings and may span
// several (gaps between them are allowed).
func (r *Reservation) SetAccess(off, size uint64, desc ...cu.MemAccessDesc) error {
	addr := r.Base() + cu.DevicePtr(off)
	if err := r.enter(off, size); err != nil {
		return rangeErr(err, "set access", addr, size)
	}
	defer r.l.exit()
	if err := r.m.b.SetAccess(addr, size, desc); err != nil {
		return opErr(err, "set access", "%s %v", rangeArgs(addr, size), desc)
	}
	return nil
}

// Unmap unmaps every mapping in the size bytes at offset off, in one driver call, and
// closes their Mapping values. The range may hold gaps; it must not split a mapping.
func (r *Reservation) Unmap(off, size uint64) error {
	addr := r.Base() + cu.DevicePtr(off)
	if err := r.enter(off, size); err != nil {
		return rangeErr(err, "unmap", addr, size)
	}
	defer r.l.exit()
	r.ranges.Lock()
	defer r.ranges.Unlock()
	r.mu.Lock()
	lo, _ := slices.BinarySearchFunc(r.maps, addr, byAddr)
	hi := lo
	for hi < len(r.maps) && r.maps[hi].addr < addr+cu.DevicePtr(size) {
		hi++
	}
	split := r.splits(lo, hi, addr, size)
	victims := slices.Clone(r.maps[lo:hi])
	r.mu.Unlock()
	if split {
		return rangeErr(invalid("the range splits a mapping"), "unmap", addr, size)
	}
	return rangeErr(r.unmapAll(addr, size, victims), "unmap", addr, size)
}

// splits reports whether [addr, addr+size), whose mappings are r.maps[lo:hi], cuts through
// a mapping: the last open one before it runs into it, or the last one in it runs past its
// end. Mappings closed but not yet dropped from the list (Mapping.Close drops its own right
// after the driver's unmap) are passed over; the caller holds r.mu.
func (r *Reservation) splits(lo, hi int, addr cu.DevicePtr, size uint64) bool {
	for i := lo - 1; i >= 0; i-- {
		if !r.maps[i].l.retired() {
			if r.maps[i].end() > addr {
				return true
			}
			break
		}
	}
	for i := hi - 1; i >= lo; i-- {
		if !r.maps[i].l.retired() {
			return r.maps[i].end() > addr+cu.DevicePtr(size)
		}
	}
	return false
}

// unmapAll unmaps [addr, addr+size) in one driver call once the operations in flight on
// the mappings in it (victims) have finished, and closes them and drops the closed ones
// from r's list; on failure they stay open.
func (r *Reservation) unmapAll(addr cu.DevicePtr, size uint64, victims []*Mapping) error {
	held := victims[:0:0]
	for _, mp := range victims {
		mp.l.mu.Lock()
		if mp.l.g.Drain() {
			held = append(held, mp)
		} else {
			mp.l.mu.Unlock() // closed meanwhile
		}
	}
	var err error
	if len(held) > 0 {
		err = r.m.b.Unmap(addr, size)
	}
	for _, mp := range held {
		if err != nil {
			mp.l.g.Reopen()
		} else {
			mp.l.g.Retire()
		}
		mp.l.mu.Unlock()
	}
	if err == nil && len(held) > 0 {
		r.mu.Lock()
		r.maps = slices.DeleteFunc(r.maps, func(mp *Mapping) bool { return mp.l.closed() })
		r.mu.Unlock()
	}
	return err
}

// forgetOne drops mp, just closed, from r's list. A mapping made at mp's address since its
// driver unmap may sit before it in the list.
func (r *Reservation) forgetOne(mp *Mapping) {
	r.mu.Lock()
	i, _ := slices.BinarySearchFunc(r.maps, mp.addr, byAddr)
	for ; i < len(r.maps) && r.maps[i].addr == mp.addr; i++ {
		if r.maps[i] == mp {
			r.maps = slices.Delete(r.maps, i, i+1)
			break
		}
	}
	r.mu.Unlock()
}

// Close unmaps every mapping still open in the reservation (in one driver call) and frees
// it, once the operations in flight on it have finished. It is idempotent.
func (r *Reservation) Close() error {
	if !r.usable() {
		return rangeErr(errNoReservation, "free", r.Base(), r.Size())
	}
	return r.l.close(func() error {
		r.mu.Lock()
		open := slices.Clone(r.maps)
		r.mu.Unlock()
		if err := r.unmapAll(r.base, r.size, open); err != nil {
			return rangeErr(err, "unmap", r.base, r.size)
		}
		return rangeErr(r.m.b.Free(r.base, r.size), "free", r.base, r.size)
	})
}

// Mapping is a mapped range. Close unmaps it. Its methods are safe for concurrent use.
// Only a Reservation makes one: a nil or zero Mapping fails every call with ErrInvalid.
type Mapping struct {
	r    *Reservation
	a    *Allocation // what is mapped, when it is one (not a multicast object)
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

func (mp *Mapping) end() cu.DevicePtr { return mp.addr + cu.DevicePtr(mp.size) }

var errNoMapping = invalid("a nil or zero Mapping (make one with Reservation.Map)")

// enter pins mp for one operation: nil when it may go on, or why not.
func (mp *Mapping) enter() error {
	if mp == nil || !mp.r.usable() {
		return errNoMapping
	}
	return mp.l.enter()
}

// SetAccess sets the access of each descriptor's location to the whole mapping, in one
// driver call (see ReadWrite, ReadOnly, NoAccess).
func (mp *Mapping) SetAccess(desc ...cu.MemAccessDesc) error {
	if err := mp.enter(); err != nil {
		return rangeErr(err, "set access", mp.Addr(), mp.Size())
	}
	defer mp.l.exit()
	if err := mp.r.m.b.SetAccess(mp.addr, mp.size, desc); err != nil {
		return opErr(err, "set access", "%s %v", rangeArgs(mp.addr, mp.size), desc)
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
		return rangeErr(errNoMapping, "unmap", mp.Addr(), mp.Size())
	}
	// Held shared, as Map holds it, so that a dma-buf export of the reservation does not
	// see the mapping before its driver call and miss that it is gone by then.
	mp.r.ranges.RLock()
	defer mp.r.ranges.RUnlock()
	err := mp.l.close(func() error {
		return rangeErr(mp.r.m.b.Unmap(mp.addr, mp.size), "unmap", mp.addr, mp.size)
	})
	if err == nil {
		mp.r.forgetOne(mp)
	}
	return err
}

// View is a reservation read and written from one device's context: an io.ReaderAt and
// io.WriterAt over its bytes, which reach as far as that device's access does. Its copies
// pin the reservation, without a lock: they run alongside each other, Close waits for them,
// and one that starts once Close has begun fails with ErrClosed. Make one with
// Reservation.From; a zero View fails with ErrInvalid.
type View struct {
	r     *Reservation
	dev   int
	split uint64 // no copy crosses a multiple of it; 0: none
}

// From returns the reservation as device dev reaches it.
func (r *Reservation) From(dev int) View { return View{r: r, dev: dev} }

// Device is the device whose context the view copies from.
func (v View) Device() int { return v.dev }

// SplitEvery returns v copying no range across a multiple of n: one driver call per piece,
// for memory whose parts lie on different devices (package peer's stripes), where whether
// the driver copies across memory of two devices in one call is not recorded.
func (v View) SplitEvery(n uint64) View {
	v.split = n
	return v
}

// ReadAt reads len(p) bytes at offset off of the reservation into p.
func (v View) ReadAt(p []byte, off int64) (int, error) { return v.copyAt("read", p, off) }

// WriteAt writes p at offset off of the reservation.
func (v View) WriteAt(p []byte, off int64) (int, error) { return v.copyAt("write", p, off) }

// copyAt copies p to or from offset off in one driver call, however many allocations of
// one device the range spans (recorded: vmmtest data/copy-across-allocations), or one per
// piece of a split view; a range that is not all mapped, with access for the view's
// device, fails in the driver. It returns how many bytes were copied before an error.
func (v View) copyAt(op string, p []byte, off int64) (int, error) {
	fail := func(done int, err error) (int, error) {
		return done, opErr(err, op, "%s at offset %d from device %d", units.Size(uint64(len(p))), off, v.dev)
	}
	r := v.r
	if off < 0 {
		return fail(0, fmt.Errorf("%w: offset %d", ErrOutOfRange, off))
	}
	if err := r.enter(uint64(off), uint64(len(p))); err != nil {
		if err == ErrOutOfRange {
			err = fmt.Errorf("%w: size %s", ErrOutOfRange, units.Size(r.Size()))
		}
		return fail(0, err)
	}
	defer r.l.exit()
	pos, done := uint64(off), 0
	for done < len(p) {
		n := uint64(len(p) - done)
		if v.split != 0 {
			n = min(n, v.split-pos%v.split)
		}
		q, addr := p[done:done+int(n)], r.base+cu.DevicePtr(pos)
		var err error
		if op == "write" {
			err = r.m.WriteAt(v.dev, q, addr)
		} else {
			err = r.m.ReadAt(v.dev, q, addr)
		}
		if err != nil {
			return fail(done, err)
		}
		done, pos = done+int(n), pos+n
	}
	return done, nil
}
