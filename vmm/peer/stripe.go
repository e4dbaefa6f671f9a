package peer

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// StripeOptions configure Stripe.
type StripeOptions struct {
	// Stripe is the size of each stripe, rounded up to the granularity. Zero gives each
	// resident device one stripe of size/len(resident) (rounded up), as vectorAddMMAP does;
	// a smaller stripe deals the stripes round-robin over the resident devices.
	Stripe uint64
	// Access lists the devices granted read-write access to the whole range; nil means the
	// resident devices. Each must be able to access every resident device as a peer. The
	// first is the device ReadAt and WriteAt copy from.
	Access []int
}

// StripeInfo describes one stripe of a Striped range.
type StripeInfo struct {
	Offset uint64
	Size   uint64
	Device int // the device whose memory backs the stripe
}

// Striped is one contiguous range of device addresses whose stripes live on different
// devices. It is safe for concurrent use: copies run alongside each other and pin the
// range without a lock, and Close waits for those in flight.
//
// Only Stripe makes one: a nil or zero Striped fails every call with vmm.ErrInvalid.
type Striped struct {
	g       *vmm.Region // its device is the one ReadAt and WriteAt copy from
	stripe  uint64
	stripes []StripeInfo
}

// Stripe reserves one range of size bytes (rounded up to a whole number of stripes), backs
// its stripes with memory of the resident devices in turn, and grants every device of
// opts.Access read-write access to the whole range in one call. On error nothing is left
// allocated.
//
// vectorAddMMAP releases each stripe's allocation as soon as it is mapped (the mapping
// keeps the memory alive); Striped keeps them until Close instead, so that a release the
// driver refuses can be retried rather than leak, and a failure midway can be undone.
func Stripe(m *vmm.Manager, size uint64, resident []int, opts StripeOptions) (*Striped, error) {
	fail := func(err error) (*Striped, error) {
		return nil, opError("stripe", fmt.Sprintf("%s over devices %v", units.Size(size), resident), err)
	}
	if size == 0 || len(resident) == 0 {
		return fail(fmt.Errorf("%w: zero size or no resident device", vmm.ErrInvalid))
	}
	access := opts.Access
	if access == nil {
		access = resident
	}
	if len(access) == 0 {
		return fail(fmt.Errorf("%w: no device to grant access to", vmm.ErrInvalid))
	}
	// Every device that maps the range must reach every device that backs it.
	for _, d := range access {
		for _, r := range resident {
			if err := canAccess(m, d, r); err != nil {
				return fail(err)
			}
		}
	}
	// One granularity for all: the largest of the resident devices', so that every stripe
	// is a valid allocation on its device and starts at an address aligned for it.
	var g uint64
	for _, r := range resident {
		dg, err := granularity(m, r)
		if err != nil {
			return fail(err)
		}
		g = max(g, dg)
	}
	n := uint64(len(resident))
	stripe := opts.Stripe
	if stripe == 0 {
		stripe = size/n + min(size%n, 1)
	}
	stripe, ok := units.AlignUp(stripe, g)
	if !ok {
		return fail(vmm.ErrTooLarge)
	}
	if opts.Stripe != 0 {
		n = size/stripe + min(size%stripe, 1)
	}
	total := n * stripe
	if total/stripe != n {
		return fail(vmm.ErrTooLarge)
	}

	tx := m.Begin(nil)
	r, err := tx.NewRegion(total, access[0], vmm.WithAlignment(g))
	if err != nil {
		return fail(tx.Rollback(err))
	}
	s := &Striped{g: r, stripe: stripe}
	var allocs []*vmm.Allocation
	for i := range n {
		dev := resident[i%uint64(len(resident))]
		a, err := tx.Create(stripe, vmm.DeviceProps(dev))
		if err != nil {
			return fail(tx.Rollback(err))
		}
		allocs = append(allocs, a)
		s.stripes = append(s.stripes, StripeInfo{Offset: i * stripe, Size: stripe, Device: dev})
	}
	if err := tx.Add(r, 0, vmm.ReadWrite(access...), allocs...); err != nil {
		return fail(tx.Rollback(err))
	}
	tx.Commit()
	return s, nil
}

func (s *Striped) usable() bool { return s != nil && s.g != nil }

// Base is the range's first device address.
func (s *Striped) Base() cu.DevicePtr {
	if !s.usable() {
		return 0
	}
	return s.g.Base()
}

// Size is the range's size, a whole number of stripes.
func (s *Striped) Size() uint64 {
	if !s.usable() {
		return 0
	}
	return s.g.Size()
}

// Stripes lists the stripes in address order.
func (s *Striped) Stripes() []StripeInfo {
	if !s.usable() {
		return nil
	}
	return append([]StripeInfo(nil), s.stripes...)
}

// DeviceAt returns the device whose memory backs offset off.
func (s *Striped) DeviceAt(off uint64) (int, error) {
	args := fmt.Sprintf("offset %d", off)
	if !s.usable() {
		return -1, opError("device at", args, errNoStriped)
	}
	if off >= s.Size() {
		return -1, opError("device at", args, fmt.Errorf("%w: size %s", vmm.ErrOutOfRange, units.Size(s.Size())))
	}
	return s.stripes[off/s.stripe].Device, nil
}

// ReadAt reads len(p) bytes at offset off into p, from the context of the first device
// granted access, one copy per stripe.
func (s *Striped) ReadAt(p []byte, off int64) (int, error) { return s.view().ReadAt(p, off) }

// WriteAt writes p at offset off, from the context of the first device granted access, one
// copy per stripe.
func (s *Striped) WriteAt(p []byte, off int64) (int, error) { return s.view().WriteAt(p, off) }

func (s *Striped) view() vmm.View {
	if !s.usable() {
		return vmm.View{}
	}
	return s.From(s.g.Device())
}

// From returns the range as device dev reaches it: its reads and writes are issued from
// dev's context, one copy per stripe (stripes lie on different devices, and whether the
// driver copies across two devices' memory in one call is not recorded).
func (s *Striped) From(dev int) vmm.View {
	if !s.usable() {
		return vmm.View{}
	}
	return s.g.From(dev).SplitEvery(s.stripe)
}

// Close unmaps the range and frees it once the copies in flight have finished, and
// releases the stripes' memory. It is idempotent; after a Close that failed, a later Close
// retries what failed.
func (s *Striped) Close() error {
	if !s.usable() {
		return opError("close", "", errNoStriped)
	}
	return opError("close", "", s.g.Close())
}
