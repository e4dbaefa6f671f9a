package peer

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/guard"
	"github.com/cuvmm/cuvmm/vmm"
)

// StripeOptions configure Stripe.
type StripeOptions struct {
	// Stripe is the size of each stripe, rounded up to the granularity. Zero gives each
	// resident device one stripe of size/len(resident) (rounded up), as vectorAddMMAP does;
	// a smaller stripe deals the stripes round-robin over the resident devices.
	Stripe uint64
	// Access lists the devices granted read-write access to the whole range; nil means the
	// resident devices. Each must be able to access every resident device as a peer.
	Access []int
}

// StripeInfo describes one stripe of a Striped range.
type StripeInfo struct {
	Offset uint64
	Size   uint64
	Device int // the device whose memory backs the stripe
}

// Striped is one contiguous range of device addresses whose stripes live on different
// devices. It is safe for concurrent use: copies run alongside each other, and Close waits
// for those in flight.
type Striped struct {
	g       guard.Guard // copies in flight; Close drains them
	mu      sync.Mutex  // serializes Close
	b       vmm.Backend
	base    cu.DevicePtr
	size    uint64
	stripes []StripeInfo
	handles []cu.MemHandle
	access  []int
	pending []cu.MemHandle // handles whose release failed in Close

	closed, unmapped, freed, done bool
}

// Stripe reserves one range of size bytes (rounded up to a whole number of stripes), backs
// its stripes with memory of the resident devices in turn, and grants every device of
// opts.Access read-write access to the whole range in one call.
//
// vectorAddMMAP releases each stripe's handle as soon as it is mapped (the mapping keeps
// the memory alive); Striped keeps them until Close instead, so that a release the driver
// refuses can be retried rather than leak, and a failure midway can be undone.
func Stripe(m *vmm.Manager, size uint64, resident []int, opts StripeOptions) (*Striped, error) {
	args := fmt.Sprintf("%s over devices %v", vmm.Size(size), resident)
	fail := func(err error) (*Striped, error) { return nil, &Error{Op: "stripe", Args: args, Err: err} }
	if m == nil || m.Backend() == nil {
		return fail(fmt.Errorf("%w: nil Manager", ErrInvalid))
	}
	if size == 0 || len(resident) == 0 {
		return fail(fmt.Errorf("%w: zero size or no resident device", ErrInvalid))
	}
	b := m.Backend()
	access := opts.Access
	if access == nil {
		access = resident
	}
	if len(access) == 0 {
		return fail(fmt.Errorf("%w: no device to grant access to", ErrInvalid))
	}
	// Every device that maps the range must reach every device that backs it.
	for _, d := range access {
		for _, r := range resident {
			if err := canAccess(b, d, r); err != nil {
				return fail(err)
			}
		}
	}
	// One granularity for all: the largest of the resident devices', so that every stripe
	// is a valid allocation on its device and starts at an address aligned for it.
	var g uint64
	for _, r := range resident {
		prop := deviceProp(r)
		dg, err := b.Granularity(&prop, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
		if err != nil {
			return fail(vmm.Call(err, "granularity of device %d", r))
		}
		if dg == 0 || dg&(dg-1) != 0 {
			return fail(fmt.Errorf("%w: device %d granularity %d", ErrInvalid, r, dg))
		}
		g = max(g, dg)
	}
	stripe := opts.Stripe
	if stripe == 0 {
		stripe = size / uint64(len(resident))
		if size%uint64(len(resident)) != 0 {
			stripe++
		}
	}
	stripe, ok := alignUp(stripe, g)
	if !ok {
		return fail(fmt.Errorf("%w: stripe overflows", ErrInvalid))
	}
	n := uint64(len(resident))
	if opts.Stripe != 0 {
		n = size / stripe
		if size%stripe != 0 {
			n++
		}
	}
	total := n * stripe
	if total/stripe != n {
		return fail(fmt.Errorf("%w: size overflows", ErrInvalid))
	}
	va, err := b.Reserve(total, g, 0, 0)
	if err != nil {
		return fail(vmm.Call(err, "reserve %s alignment %s", vmm.Size(total), vmm.Size(g)))
	}
	s := &Striped{b: b, base: va, size: total, access: append([]int(nil), access...)}
	undo := func() error {
		var errs []error
		if len(s.handles) > 0 {
			// One unmap over every stripe mapped so far: the driver unmaps adjacent
			// mappings in one call.
			mapped := uint64(len(s.stripes)) * stripe
			if mapped > 0 {
				errs = append(errs, vmm.Call(b.Unmap(va, mapped), "unmap %v+%s", va, vmm.Size(mapped)))
			}
			for _, h := range s.handles {
				errs = append(errs, vmm.Call(b.Release(h), "release %v", h))
			}
		}
		errs = append(errs, vmm.Call(b.Free(va, total), "free %v+%s", va, vmm.Size(total)))
		return errors.Join(errs...)
	}
	for i := uint64(0); i < n; i++ {
		dev := resident[int(i%uint64(len(resident)))]
		off := i * stripe
		prop := deviceProp(dev)
		h, err := b.Create(stripe, &prop, 0)
		if err != nil {
			return fail(errors.Join(vmm.Call(err, "create %s on device %d", vmm.Size(stripe), dev), undo()))
		}
		s.handles = append(s.handles, h)
		at := va + cu.DevicePtr(off)
		if err := b.Map(at, stripe, 0, h, 0); err != nil {
			return fail(errors.Join(vmm.Call(err, "map %v+%s %v", at, vmm.Size(stripe), h), undo()))
		}
		s.stripes = append(s.stripes, StripeInfo{Offset: off, Size: stripe, Device: dev})
	}
	desc := vmm.ReadWrite(access...)
	if err := b.SetAccess(va, total, desc); err != nil {
		return fail(errors.Join(vmm.Call(err, "set access %v+%s %s", va, vmm.Size(total), descString(desc)), undo()))
	}
	return s, nil
}

// Base is the range's first device address.
func (s *Striped) Base() cu.DevicePtr {
	if s == nil {
		return 0
	}
	return s.base
}

// Size is the range's size, a whole number of stripes.
func (s *Striped) Size() uint64 {
	if s == nil {
		return 0
	}
	return s.size
}

// Stripes lists the stripes in address order.
func (s *Striped) Stripes() []StripeInfo {
	if s == nil {
		return nil
	}
	return append([]StripeInfo(nil), s.stripes...)
}

// DeviceAt returns the device whose memory backs offset off.
func (s *Striped) DeviceAt(off uint64) (int, error) {
	if s == nil || off >= s.size || len(s.stripes) == 0 {
		return -1, &Error{Op: "device at", Args: fmt.Sprintf("offset %d", off), Err: ErrOutOfRange}
	}
	return s.stripes[off/s.stripes[0].Size].Device, nil
}

// CopyIn writes src at offset off from device dev's context (dev must be one of the
// devices granted access), one copy per stripe.
func (s *Striped) CopyIn(dev int, off uint64, src []byte) error {
	return s.copy("copy in", dev, off, src, func(va cu.DevicePtr, q []byte) error { return s.b.CopyHtoD(dev, va, q) })
}

// CopyOut reads len(dst) bytes at offset off from device dev's context.
func (s *Striped) CopyOut(dev int, dst []byte, off uint64) error {
	return s.copy("copy out", dev, off, dst, func(va cu.DevicePtr, q []byte) error { return s.b.CopyDtoH(dev, q, va) })
}

func (s *Striped) copy(op string, dev int, off uint64, p []byte, f func(cu.DevicePtr, []byte) error) error {
	args := fmt.Sprintf("%s at offset %d device %d", vmm.Size(uint64(len(p))), off, dev)
	if s == nil {
		return &Error{Op: op, Args: args, Err: fmt.Errorf("%w: nil Striped", ErrInvalid)}
	}
	if !s.g.Enter(0) {
		return &Error{Op: op, Args: args, Err: ErrClosed}
	}
	defer s.g.Exit()
	if off > s.size || uint64(len(p)) > s.size-off {
		return &Error{Op: op, Args: args, Err: ErrOutOfRange}
	}
	// One copy per stripe: stripes are separate allocations (on separate devices), and a
	// driver copy across two is not recorded behaviour.
	done := 0
	for done < len(p) {
		pos := off + uint64(done)
		st := s.stripes[pos/s.stripes[0].Size]
		n := min(uint64(len(p)-done), st.Offset+st.Size-pos)
		va := s.base + cu.DevicePtr(pos)
		if err := f(va, p[done:done+int(n)]); err != nil {
			return &Error{Op: op, Args: args, Err: vmm.Call(err, "copy %v+%s (stripe on device %d)", va, vmm.Size(n), st.Device)}
		}
		done += int(n)
	}
	return nil
}

// Close unmaps the range (which frees the stripes' memory) and frees it. It is idempotent.
func (s *Striped) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	// Each step is done once; a Close that failed retries from the step that failed. The
	// first waits for the copies in flight and refuses new ones.
	s.closed = true
	s.g.Drain()
	if !s.unmapped {
		if err := s.b.Unmap(s.base, s.size); err != nil {
			return &Error{Op: "close", Err: vmm.Call(err, "unmap %v+%s", s.base, vmm.Size(s.size))}
		}
		s.unmapped = true
		s.pending, s.handles = s.handles, nil
	}
	var errs []error
	var left []cu.MemHandle
	for _, h := range s.pending {
		if err := s.b.Release(h); err != nil {
			errs = append(errs, vmm.Call(err, "release %v", h))
			left = append(left, h)
		}
	}
	s.pending = left
	if !s.freed {
		if err := s.b.Free(s.base, s.size); err != nil {
			errs = append(errs, vmm.Call(err, "free %v+%s", s.base, vmm.Size(s.size)))
		} else {
			s.freed = true
		}
	}
	if len(errs) > 0 {
		return &Error{Op: "close", Err: errors.Join(errs...)}
	}
	s.done = true
	return nil
}
