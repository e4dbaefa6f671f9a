package vmm

import (
	"reflect"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/guard"
)

// Manager is the typed, safe layer over a Backend: physical allocations, reservations and
// mappings are values with an idempotent Close, and errors name the operation and its
// arguments. A Manager is safe for concurrent use.
//
// Make one with New; a nil or zero Manager, or one over a nil Backend, fails every call with
// ErrInvalid.
type Manager struct {
	b Backend
	// orphans are releases the driver refused of objects no caller holds (Pending).
	orphans Pending
}

// New returns a Manager over b. A nil b, or a nil pointer of a Backend type (the result of
// a constructor whose error was ignored), makes a Manager whose calls fail with ErrInvalid.
func New(b Backend) *Manager {
	if b != nil {
		if v := reflect.ValueOf(b); v.Kind() == reflect.Pointer && v.IsNil() {
			b = nil
		}
	}
	return &Manager{b: b}
}

// Backend returns the backend the manager drives (nil for a nil or zero Manager).
func (m *Manager) Backend() Backend {
	if m == nil {
		return nil
	}
	return m.b
}

// Pending is the manager's own list of releases the driver refused, for what no caller
// holds: the undo of an operation that failed and returned nothing to retry it on (a
// transaction begun without a Pending list of its own, a building block's constructor), and
// the reference Pointer retained. Create and Reserve retry the list first (an atomic load
// while it is empty), so that nothing such a refusal leaves stays for longer than the
// driver refuses; Pending().Retry() does it now and says what is still refused. A nil
// Manager has no list (nil).
func (m *Manager) Pending() *Pending {
	if m == nil {
		return nil
	}
	return &m.orphans
}

func (m *Manager) usable() bool { return m != nil && m.b != nil }

// call is f's result on m's backend, or errNoBackend for a Manager without one.
func call[T any](m *Manager, f func(Backend) (T, error)) (T, error) {
	if !m.usable() {
		var zero T
		return zero, errNoBackend
	}
	return f(m.b)
}

// do is call for a backend call that returns only an error.
func (m *Manager) do(f func(Backend) error) error {
	if !m.usable() {
		return errNoBackend
	}
	return f(m.b)
}

var errNoBackend = invalid("a Manager without a backend (use vmm.New)")

// Location says where physical memory lives.
type Location = cu.MemLocation

// OnDevice is memory of device ordinal dev.
func OnDevice(dev int) Location {
	return Location{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: int32(dev)}
}

// OnHost is host memory (CUDA 12.2+ drivers and devices with host VMM support).
func OnHost() Location { return Location{Type: cu.MEM_LOCATION_TYPE_HOST} }

// OnHostNUMA is host memory of one NUMA node.
func OnHostNUMA(node int) Location {
	return Location{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA, ID: int32(node)}
}

// OnHostNUMACurrent is host memory of the calling thread's NUMA node.
func OnHostNUMACurrent() Location { return Location{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT} }

// Props describes physical memory to create.
type Props struct {
	Location Location
	// HandleTypes are the shareable handle kinds the memory may be exported as.
	HandleTypes cu.MemHandleType
	// Compressible asks for generically compressible memory; it is a hint, see
	// Allocation.Compressible.
	Compressible bool
	// GPUDirectRDMA asks for memory usable by third-party devices through GPUDirect RDMA.
	GPUDirectRDMA bool
	// Usage are MEM_CREATE_USAGE_* bits.
	Usage uint16
}

// DeviceProps is the common case: plain memory of device dev.
func DeviceProps(dev int) Props { return Props{Location: OnDevice(dev)} }

// Driver returns p as the driver takes it.
func (p Props) Driver() cu.MemAllocationProp {
	d := cu.MemAllocationProp{
		Type:                 cu.MEM_ALLOCATION_TYPE_PINNED,
		RequestedHandleTypes: p.HandleTypes,
		Location:             p.Location,
		Usage:                p.Usage,
	}
	if p.Compressible {
		d.CompressionType = cu.MEM_ALLOCATION_COMP_GENERIC
	}
	if p.GPUDirectRDMA {
		d.GPUDirectRDMACapable = 1
	}
	return d
}

// Granularity returns the minimum (or recommended) size and alignment of allocations with
// props p.
func (m *Manager) Granularity(p Props, recommended bool) (uint64, error) {
	opt := cu.MEM_ALLOC_GRANULARITY_MINIMUM
	if recommended {
		opt = cu.MEM_ALLOC_GRANULARITY_RECOMMENDED
	}
	d := p.Driver()
	g, err := call(m, func(b Backend) (uint64, error) { return b.Granularity(&d, opt) })
	if err != nil {
		return g, opErr(err, "granularity", "%v recommended=%v", p.Location, recommended)
	}
	return g, nil
}

// ReadWrite grants read-write access to each device in devs.
func ReadWrite(devs ...int) []cu.MemAccessDesc {
	return access(cu.MEM_ACCESS_FLAGS_PROT_READWRITE, devs)
}

// ReadOnly grants read access to each device in devs.
func ReadOnly(devs ...int) []cu.MemAccessDesc { return access(cu.MEM_ACCESS_FLAGS_PROT_READ, devs) }

// NoAccess revokes the access of each device in devs.
func NoAccess(devs ...int) []cu.MemAccessDesc { return access(cu.MEM_ACCESS_FLAGS_PROT_NONE, devs) }

func access(f cu.MemAccessFlags, devs []int) []cu.MemAccessDesc {
	d := make([]cu.MemAccessDesc, len(devs))
	for i, dev := range devs {
		d[i] = cu.MemAccessDesc{Location: OnDevice(dev), Flags: f}
	}
	return d
}

// life is what an Allocation, Reservation or Mapping shares with the calls on it:
// operations pin it for their backend call (enter, exit) without a lock, and Close waits
// for them, so no operation reaches the backend once Close has begun, and Close never
// frees what a call in flight still uses.
type life struct {
	g  guard.Guard
	mu sync.Mutex // serializes Close
}

// enter pins the object for one operation: ErrClosed once it is closed or closing.
func (l *life) enter() error {
	if !l.g.Enter(0) {
		return ErrClosed
	}
	return nil
}

func (l *life) exit() { l.g.Exit() }

// close runs f once the operations in flight have finished and refuses new ones. It is
// idempotent: after a close that succeeded it returns nil; after one where f failed, the
// object is open again and a later close retries.
func (l *life) close(f func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.g.Drain() {
		return nil
	}
	if err := f(); err != nil {
		l.g.Reopen()
		return err
	}
	l.g.Retire()
	return nil
}

func (l *life) closed() bool { return !l.g.Open() }

// retired reports whether the object's close has finished (not only begun).
func (l *life) retired() bool { return l.g.Retired() }

// SameBackend reports whether the objects of o (allocations, reservations, regions) may be
// used with m's: both Managers are over one backend.
func (m *Manager) SameBackend(o *Manager) bool { return !m.foreign(o) }

// errForeign is the error of an object of one backend handed to another, where its handle
// names another object, or none.
var errForeign = invalid("an object of another backend")

// foreign reports whether the objects of Manager o are of another backend than m's. Backends
// that cannot be compared (a struct holding a map, or wrapping one) are never the same: the
// objects of a Manager over such a backend go only with its own.
func (m *Manager) foreign(o *Manager) bool {
	if m == o {
		return false
	}
	if m == nil || o == nil {
		return true
	}
	x, y := reflect.ValueOf(m.b), reflect.ValueOf(o.b)
	return !x.IsValid() || !y.IsValid() || x.Type() != y.Type() || !x.Comparable() || !y.Comparable() || m.b != o.b
}
