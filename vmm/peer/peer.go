// Package peer shares device memory between the GPUs of one machine through the CUDA
// virtual memory management API: memory lives on one device, is mapped once, and other
// devices are granted read-write or read-only access to that one mapping (and lose it
// again), without the context-wide cuCtxEnablePeerAccess. Stripe spreads one contiguous
// range over several devices, as the cuda-samples program vectorAddMMAP does.
//
// Access is per mapping and per device: cuMemSetAccess sets it for any number of devices
// in one call, which is how Grant, Revoke and Stripe use it. A device may only be granted
// access to memory of a device it can reach as a peer (cuDeviceCanAccessPeer); both check
// that first and fail with ErrNoPeerAccess rather than let the driver fail later.
//
// Memory and Striped read and write like the package's siblings (io.ReaderAt,
// io.WriterAt), from the context of the owner or of the first device granted access;
// From(dev) gives a vmm.View that reads and writes from another device's context, so that
// what a device's access allows can be seen. Errors are *vmm.Error values (package
// "peer") and match vmm's sentinels (vmm.ErrClosed, vmm.ErrInvalid, vmm.ErrOutOfRange,
// vmm.ErrTooLarge) with errors.Is.
package peer

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

var (
	// ErrNoPeerAccess is returned when a device cannot access another device's memory.
	ErrNoPeerAccess = errors.New("no peer access")
	// ErrOwner is returned by Grant and Revoke for the owner device, which always keeps
	// read-write access (copies and the owner's own kernels need it).
	ErrOwner = errors.New("the owner's access cannot change")
)

// opError is the error of a failed operation of this package; a nil err stays nil.
func opError(op, args string, err error) error {
	if err == nil {
		return nil
	}
	return &vmm.Error{Pkg: "peer", Op: op, Args: args, Err: err}
}

var (
	errNoMemory  = fmt.Errorf("%w: a nil or zero Memory (make one with New)", vmm.ErrInvalid)
	errNoStriped = fmt.Errorf("%w: a nil or zero Striped (make one with Stripe)", vmm.ErrInvalid)
)

// Mode is the access a device is granted.
type Mode int

const (
	// ReadWrite lets the device read and write the memory.
	ReadWrite Mode = iota
	// ReadOnly lets the device read it; its writes fault.
	ReadOnly
)

func (m Mode) String() string {
	if _, ok := m.flags(); !ok {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return [...]string{ReadWrite: "read-write", ReadOnly: "read-only"}[m]
}

func (m Mode) flags() (cu.MemAccessFlags, bool) {
	switch m {
	case ReadWrite:
		return cu.MEM_ACCESS_FLAGS_PROT_READWRITE, true
	case ReadOnly:
		return cu.MEM_ACCESS_FLAGS_PROT_READ, true
	}
	return 0, false
}

// Memory is device memory of one owner device, mapped once, that other devices are
// granted access to. It is safe for concurrent use: copies and Access run alongside each
// other and pin the memory without a lock; Grant and Revoke are serialized (each changes
// the access table the driver call sets), and Close waits for the copies in flight. What
// a device may do from a kernel changes when Grant or Revoke returns: revoking access from
// a device that is still using the memory makes its kernels fault.
//
// Only New makes one: a nil or zero Memory fails every call with vmm.ErrInvalid.
type Memory struct {
	m     *vmm.Manager
	r     *vmm.Reservation
	owner int
	a     *vmm.Allocation
	mp    *vmm.Mapping

	mu     sync.Mutex // serializes Grant, Revoke and Close
	closed bool
	access map[int]Mode // devices other than the owner with access
}

// New creates size bytes (rounded up to the granularity) of memory on device owner, maps
// it and grants the owner read-write access. On error nothing is left allocated.
func New(m *vmm.Manager, owner int, size uint64) (*Memory, error) {
	fail := func(err error) (*Memory, error) {
		return nil, opError("new", fmt.Sprintf("%s on device %d", units.Size(size), owner), err)
	}
	if size == 0 {
		return fail(fmt.Errorf("%w: zero size", vmm.ErrInvalid))
	}
	g, err := granularity(m, owner)
	if err != nil {
		return fail(err)
	}
	total, ok := units.AlignUp(size, g)
	if !ok {
		return fail(vmm.ErrTooLarge)
	}
	tx := m.Begin(nil)
	a, err := tx.Create(total, vmm.DeviceProps(owner))
	if err != nil {
		return fail(tx.Rollback(err))
	}
	r, err := tx.Reserve(total)
	if err != nil {
		return fail(tx.Rollback(err))
	}
	mps, err := tx.MapAll(r, 0, vmm.ReadWrite(owner), a)
	if err != nil {
		return fail(tx.Rollback(err))
	}
	tx.Commit()
	return &Memory{m: m, r: r, owner: owner, a: a, mp: mps[0], access: map[int]Mode{}}, nil
}

// usable reports whether p was made by New.
func (p *Memory) usable() bool { return p != nil && p.mp != nil }

// Base is the memory's device address, the same for every device.
func (p *Memory) Base() cu.DevicePtr {
	if !p.usable() {
		return 0
	}
	return p.r.Base()
}

// Size is the memory's size, a multiple of the granularity.
func (p *Memory) Size() uint64 {
	if !p.usable() {
		return 0
	}
	return p.r.Size()
}

// Owner is the device the memory lives on (-1 for a nil or zero Memory).
func (p *Memory) Owner() int {
	if !p.usable() {
		return -1
	}
	return p.owner
}

// Handle is the allocation's handle, owned by the Memory (valid until Close).
func (p *Memory) Handle() cu.MemHandle {
	if !p.usable() {
		return 0
	}
	return p.a.Handle()
}

// Grants returns the access of each device other than the owner.
func (p *Memory) Grants() map[int]Mode {
	if !p.usable() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.access)
}

// Grant gives each device of devs the access mode to the whole memory, in one driver call.
// Each must be able to access the owner as a peer.
func (p *Memory) Grant(mode Mode, devs ...int) error {
	args := fmt.Sprintf("%v to devices %v", mode, devs)
	f, ok := mode.flags()
	if !ok {
		return opError("grant", args, fmt.Errorf("%w: mode %v", vmm.ErrInvalid, mode))
	}
	return opError("grant", args, p.set(f, devs, func(d int) { p.access[d] = mode }))
}

// Revoke takes away the access of each device of devs, in one driver call.
func (p *Memory) Revoke(devs ...int) error {
	err := p.set(cu.MEM_ACCESS_FLAGS_PROT_NONE, devs, func(d int) { delete(p.access, d) })
	return opError("revoke", fmt.Sprintf("devices %v", devs), err)
}

// set sets the access of devs to f in one driver call and, if it worked, records each.
func (p *Memory) set(f cu.MemAccessFlags, devs []int, record func(dev int)) error {
	if !p.usable() {
		return errNoMemory
	}
	if len(devs) == 0 {
		return fmt.Errorf("%w: no devices", vmm.ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return vmm.ErrClosed
	}
	desc := make([]cu.MemAccessDesc, 0, len(devs))
	for _, d := range devs {
		if d == p.owner {
			return fmt.Errorf("%w: device %d owns the memory", ErrOwner, d)
		}
		if f != cu.MEM_ACCESS_FLAGS_PROT_NONE {
			if err := canAccess(p.m, d, p.owner); err != nil {
				return err
			}
		}
		desc = append(desc, cu.MemAccessDesc{Location: vmm.OnDevice(d), Flags: f})
	}
	if err := p.mp.SetAccess(desc...); err != nil {
		return err
	}
	for _, d := range devs {
		record(d)
	}
	return nil
}

// Access returns the access device dev has, as the driver reports it.
func (p *Memory) Access(dev int) (cu.MemAccessFlags, error) {
	if !p.usable() {
		return 0, opError("get access", fmt.Sprintf("device %d", dev), errNoMemory)
	}
	f, err := p.mp.Access(dev)
	if err != nil {
		return 0, opError("get access", fmt.Sprintf("device %d", dev), err)
	}
	return f, nil
}

// ReadAt reads len(buf) bytes at offset off of the memory into buf, from the owner's
// context. It returns how many bytes it read, len(buf) or an error.
func (p *Memory) ReadAt(buf []byte, off int64) (int, error) {
	return p.From(p.Owner()).ReadAt(buf, off)
}

// WriteAt writes buf at offset off of the memory, from the owner's context.
func (p *Memory) WriteAt(buf []byte, off int64) (int, error) {
	return p.From(p.Owner()).WriteAt(buf, off)
}

// From returns the memory as device dev reaches it: its reads and writes are issued from
// dev's context and work as far as dev's access does.
func (p *Memory) From(dev int) vmm.View {
	if !p.usable() {
		return vmm.View{}
	}
	return p.r.From(dev)
}

// Close unmaps the memory and frees its addresses once the copies in flight have finished,
// and releases the allocation. It is idempotent; after a Close that failed, a later Close
// retries what failed.
func (p *Memory) Close() error {
	if !p.usable() {
		return opError("close", "", errNoMemory)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return opError("close", "", errors.Join(p.r.Close(), p.a.Close()))
}

// canAccess checks that device dev can access memory of device owner.
func canAccess(m *vmm.Manager, dev, owner int) error {
	if dev == owner {
		return nil
	}
	ok, err := m.CanAccessPeer(dev, owner)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: device %d cannot access device %d", ErrNoPeerAccess, dev, owner)
	}
	return nil
}

// granularity is device dev's minimum allocation granularity, a power of two.
func granularity(m *vmm.Manager, dev int) (uint64, error) {
	g, err := m.Granularity(vmm.DeviceProps(dev), false)
	if err == nil && (g == 0 || g&(g-1) != 0) {
		err = fmt.Errorf("%w: granularity %d of device %d is not a power of two", vmm.ErrInvalid, g, dev)
	}
	return g, err
}
