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
package peer

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/guard"
	"github.com/cuvmm/cuvmm/vmm"
)

var (
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("peer: closed")
	// ErrNoPeerAccess is returned when a device cannot access another device's memory.
	ErrNoPeerAccess = errors.New("peer: no peer access")
	// ErrOwner is returned by Grant and Revoke for the owner device, which always keeps
	// read-write access (copies and the owner's own kernels need it).
	ErrOwner = errors.New("peer: the owner's access cannot change")
	// ErrOutOfRange is returned for copies outside the memory.
	ErrOutOfRange = errors.New("peer: out of range")
	// ErrInvalid is returned for invalid arguments.
	ErrInvalid = errors.New("peer: invalid argument")
)

// Error is the error of a failed operation; it unwraps to the cause.
type Error struct {
	Op   string // "new", "grant", "revoke", "stripe", "copy in", "copy out", "close"
	Args string
	Err  error
}

func (e *Error) Error() string {
	s := "peer: " + e.Op
	if e.Args != "" {
		s += " " + e.Args
	}
	return s + ": " + strings.TrimPrefix(e.Err.Error(), "peer: ")
}

func (e *Error) Unwrap() error { return e.Err }

// Mode is the access a device is granted.
type Mode int

const (
	// ReadWrite lets the device read and write the memory.
	ReadWrite Mode = iota
	// ReadOnly lets the device read it; its writes fault.
	ReadOnly
)

func (m Mode) String() string {
	switch m {
	case ReadWrite:
		return "read-write"
	case ReadOnly:
		return "read-only"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
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
// other; Grant and Revoke are serialized (each changes the access table the driver call
// sets), and Close waits for the copies in flight. What a device may do from a kernel
// changes when Grant or Revoke returns: revoking access from a device that is still using
// the memory makes its kernels fault.
type Memory struct {
	g      guard.Guard // copies and queries in flight; Close drains them
	mu     sync.Mutex  // serializes Grant, Revoke and Close
	b      vmm.Backend
	owner  int
	size   uint64
	h      cu.MemHandle
	base   cu.DevicePtr
	access map[int]Mode // devices other than the owner with access

	closed, unmapped, released, freed bool
}

// New creates size bytes (rounded up to the granularity) of memory on device owner, maps
// it and grants the owner read-write access.
func New(m *vmm.Manager, owner int, size uint64) (*Memory, error) {
	args := fmt.Sprintf("%s on device %d", vmm.Size(size), owner)
	fail := func(err error) (*Memory, error) { return nil, &Error{Op: "new", Args: args, Err: err} }
	if m == nil || m.Backend() == nil {
		return fail(fmt.Errorf("%w: nil Manager", ErrInvalid))
	}
	if size == 0 {
		return fail(fmt.Errorf("%w: zero size", ErrInvalid))
	}
	b := m.Backend()
	prop := deviceProp(owner)
	g, err := b.Granularity(&prop, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
	if err != nil {
		return fail(vmm.Call(err, "granularity of device %d", owner))
	}
	total, ok := alignUp(size, g)
	if !ok {
		return fail(fmt.Errorf("%w: size overflows", ErrInvalid))
	}
	h, err := b.Create(total, &prop, 0)
	if err != nil {
		return fail(vmm.Call(err, "create %s on device %d", vmm.Size(total), owner))
	}
	va, err := b.Reserve(total, 0, 0, 0)
	if err != nil {
		return fail(errors.Join(vmm.Call(err, "reserve %s", vmm.Size(total)), b.Release(h)))
	}
	if err := b.Map(va, total, 0, h, 0); err != nil {
		return fail(errors.Join(vmm.Call(err, "map %v+%s %v", va, vmm.Size(total), h), b.Free(va, total), b.Release(h)))
	}
	if err := b.SetAccess(va, total, vmm.ReadWrite(owner)); err != nil {
		return fail(errors.Join(vmm.Call(err, "set access %v+%s rw device %d", va, vmm.Size(total), owner),
			b.Unmap(va, total), b.Free(va, total), b.Release(h)))
	}
	return &Memory{b: b, owner: owner, size: total, h: h, base: va, access: map[int]Mode{}}, nil
}

// Base is the memory's device address, the same for every device.
func (p *Memory) Base() cu.DevicePtr {
	if p == nil {
		return 0
	}
	return p.base
}

// Size is the memory's size, a multiple of the granularity.
func (p *Memory) Size() uint64 {
	if p == nil {
		return 0
	}
	return p.size
}

// Owner is the device the memory lives on.
func (p *Memory) Owner() int {
	if p == nil {
		return -1
	}
	return p.owner
}

// Handle is the allocation's handle, owned by the Memory (valid until Close).
func (p *Memory) Handle() cu.MemHandle {
	if p == nil {
		return 0
	}
	return p.h
}

// Grants returns the access of each device other than the owner.
func (p *Memory) Grants() map[int]Mode {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int]Mode, len(p.access))
	for d, m := range p.access {
		out[d] = m
	}
	return out
}

// Grant gives each device of devs the access mode to the whole memory, in one driver call.
// Each must be able to access the owner as a peer.
func (p *Memory) Grant(mode Mode, devs ...int) error {
	args := fmt.Sprintf("%v to devices %v", mode, devs)
	if p == nil {
		return &Error{Op: "grant", Args: args, Err: fmt.Errorf("%w: nil Memory", ErrInvalid)}
	}
	f, ok := mode.flags()
	if !ok {
		return &Error{Op: "grant", Args: args, Err: fmt.Errorf("%w: mode %v", ErrInvalid, mode)}
	}
	if err := p.set(f, devs); err != nil {
		return &Error{Op: "grant", Args: args, Err: err}
	}
	p.mu.Lock()
	for _, d := range devs {
		p.access[d] = mode
	}
	p.mu.Unlock()
	return nil
}

// Revoke takes away the access of each device of devs, in one driver call.
func (p *Memory) Revoke(devs ...int) error {
	args := fmt.Sprintf("devices %v", devs)
	if p == nil {
		return &Error{Op: "revoke", Args: args, Err: fmt.Errorf("%w: nil Memory", ErrInvalid)}
	}
	if err := p.set(cu.MEM_ACCESS_FLAGS_PROT_NONE, devs); err != nil {
		return &Error{Op: "revoke", Args: args, Err: err}
	}
	p.mu.Lock()
	for _, d := range devs {
		delete(p.access, d)
	}
	p.mu.Unlock()
	return nil
}

func (p *Memory) set(f cu.MemAccessFlags, devs []int) error {
	if len(devs) == 0 {
		return fmt.Errorf("%w: no devices", ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	desc := make([]cu.MemAccessDesc, 0, len(devs))
	for _, d := range devs {
		if d == p.owner {
			return fmt.Errorf("%w: device %d owns the memory", ErrOwner, d)
		}
		if f != cu.MEM_ACCESS_FLAGS_PROT_NONE {
			if err := canAccess(p.b, d, p.owner); err != nil {
				return err
			}
		}
		desc = append(desc, cu.MemAccessDesc{Location: vmm.OnDevice(d), Flags: f})
	}
	return vmm.Call(p.b.SetAccess(p.base, p.size, desc), "set access %v+%s %s", p.base, vmm.Size(p.size), descString(desc))
}

// Access returns the access device dev has, as the driver reports it.
func (p *Memory) Access(dev int) (cu.MemAccessFlags, error) {
	if p == nil {
		return 0, &Error{Op: "get access", Err: fmt.Errorf("%w: nil Memory", ErrInvalid)}
	}
	if !p.g.Enter(0) {
		return 0, &Error{Op: "get access", Args: fmt.Sprintf("device %d", dev), Err: ErrClosed}
	}
	defer p.g.Exit()
	f, err := p.b.GetAccess(vmm.OnDevice(dev), p.base)
	if err != nil {
		return 0, &Error{Op: "get access", Args: fmt.Sprintf("device %d", dev), Err: vmm.Call(err, "get access %v", p.base)}
	}
	return f, nil
}

// CopyIn writes src at offset off, from device dev's context (dev needs write access).
func (p *Memory) CopyIn(dev int, off uint64, src []byte) error {
	return p.copy("copy in", dev, off, uint64(len(src)), func(va cu.DevicePtr) error { return p.b.CopyHtoD(dev, va, src) })
}

// CopyOut reads len(dst) bytes at offset off, from device dev's context (dev needs read
// access).
func (p *Memory) CopyOut(dev int, dst []byte, off uint64) error {
	return p.copy("copy out", dev, off, uint64(len(dst)), func(va cu.DevicePtr) error { return p.b.CopyDtoH(dev, dst, va) })
}

func (p *Memory) copy(op string, dev int, off, n uint64, f func(cu.DevicePtr) error) error {
	args := fmt.Sprintf("%s at offset %d device %d", vmm.Size(n), off, dev)
	if p == nil {
		return &Error{Op: op, Args: args, Err: fmt.Errorf("%w: nil Memory", ErrInvalid)}
	}
	if !p.g.Enter(0) {
		return &Error{Op: op, Args: args, Err: ErrClosed}
	}
	defer p.g.Exit()
	if off > p.size || n > p.size-off {
		return &Error{Op: op, Args: args, Err: ErrOutOfRange}
	}
	if n == 0 {
		return nil
	}
	if err := f(p.base + cu.DevicePtr(off)); err != nil {
		return &Error{Op: op, Args: args, Err: err}
	}
	return nil
}

// Close unmaps and releases the memory and frees its addresses. It is idempotent.
func (p *Memory) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Each step is done once; a Close that failed retries from the step that failed. The
	// first waits for the copies in flight and refuses new ones.
	p.closed = true
	p.g.Drain()
	if !p.unmapped {
		if err := p.b.Unmap(p.base, p.size); err != nil {
			return &Error{Op: "close", Err: vmm.Call(err, "unmap %v+%s", p.base, vmm.Size(p.size))}
		}
		p.unmapped = true
	}
	var errs []error
	if !p.released {
		if err := p.b.Release(p.h); err != nil {
			errs = append(errs, vmm.Call(err, "release %v", p.h))
		} else {
			p.released = true
		}
	}
	if !p.freed {
		if err := p.b.Free(p.base, p.size); err != nil {
			errs = append(errs, vmm.Call(err, "free %v+%s", p.base, vmm.Size(p.size)))
		} else {
			p.freed = true
		}
	}
	if len(errs) > 0 {
		return &Error{Op: "close", Err: errors.Join(errs...)}
	}
	return nil
}

func canAccess(b vmm.Backend, dev, owner int) error {
	if dev == owner {
		return nil
	}
	ok, err := b.CanAccessPeer(dev, owner)
	if err != nil {
		return vmm.Call(err, "can device %d access device %d", dev, owner)
	}
	if !ok {
		return fmt.Errorf("%w: device %d cannot access device %d", ErrNoPeerAccess, dev, owner)
	}
	return nil
}

func deviceProp(dev int) cu.MemAllocationProp {
	return cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: vmm.OnDevice(dev)}
}

func alignUp(n, g uint64) (uint64, bool) {
	if g == 0 || g&(g-1) != 0 {
		return 0, false
	}
	r := (n + g - 1) &^ (g - 1)
	return r, r >= n
}

func descString(d []cu.MemAccessDesc) string {
	parts := make([]string, len(d))
	for i, a := range d {
		m := "rw"
		switch a.Flags {
		case cu.MEM_ACCESS_FLAGS_PROT_READ:
			m = "ro"
		case cu.MEM_ACCESS_FLAGS_PROT_NONE:
			m = "none"
		}
		parts[i] = fmt.Sprintf("%s device %d", m, a.Location.ID)
	}
	return strings.Join(parts, ",")
}
