// Package buffer is a growable device buffer built on the CUDA virtual memory management
// API: its base address stays put while it grows, and growing never copies data.
//
// A Buffer reserves virtual address space ahead of its size and commits physical memory in
// chunks as it grows. The real driver maps whole allocations only (cuMemMap refuses a size
// other than the allocation's, or any offset), so every chunk is an allocation of its own,
// mapped whole; the growth policy decides the chunk sizes:
//
//   - Geometric (the default) commits at least as much as is already committed, so
//     appending n bytes a little at a time costs O(log n) driver calls, at the price of
//     committing up to twice what is used.
//   - Exact commits what is needed, rounded up to the allocation granularity.
//
// Each growth grants access to every device of Options.Access in one cuMemSetAccess call
// over the new chunk. When the reservation is full, the buffer asks for the range right
// after it (the fixed-address hint of cuMemAddressReserve) and keeps both reservations; if
// the driver places the range elsewhere (it may: seen on an H200), the buffer reserves a
// larger range, maps the same physical chunks there and releases the old range. No data
// is copied, but the base address changes: Stats.Remaps counts it, and Options.FixedBase
// makes such a growth fail with ErrWouldMove instead.
//
// Every operation is a transaction: if a driver call fails midway, what the operation
// created is released and what it undid is restored, so the buffer is unchanged and
// usable, and nothing leaks. Releases that fail (the driver refusing to free something the
// buffer owns) are kept and retried by later operations and by Close; Stats.Pending counts
// them.
package buffer

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Policy chooses the size of the chunks a Buffer commits.
type Policy int

const (
	// Geometric commits at least as much as is already committed (the buffer at least
	// doubles its physical memory), so growth costs O(log n) driver calls.
	Geometric Policy = iota
	// Exact commits what the new size needs, rounded up to the granularity.
	Exact
)

func (p Policy) String() string {
	switch p {
	case Geometric:
		return "geometric"
	case Exact:
		return "exact"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// DefaultReserve is the virtual address space a Buffer reserves up front when
// Options.Reserve is zero. Address space costs no physical memory, and a larger
// reservation means fewer extensions.
const DefaultReserve = 1 << 30

// Options configure a Buffer. The zero value is a buffer of device 0 memory, accessible
// from device 0, with the geometric policy.
type Options struct {
	// Device owns the physical memory, unless Props says otherwise. Copies (ReadAt,
	// WriteAt) are issued from its context.
	Device int
	// Props, when set, describes the physical memory instead of Device (for example to
	// ask for shareable handle types, to export the chunks to another process).
	Props *vmm.Props
	// Access lists the devices granted read-write access to the buffer. Device is always
	// included.
	Access []int
	// Policy chooses chunk sizes; see Geometric and Exact.
	Policy Policy
	// MinChunk is the smallest chunk committed (rounded up to the granularity): commit
	// 64MiB at a time, say, however little is asked for.
	MinChunk uint64
	// MaxChunk caps the geometric policy's chunks (rounded up to the granularity), unless
	// one growth needs more. Zero means no cap.
	MaxChunk uint64
	// Reserve is the virtual address space reserved up front (rounded up to the
	// granularity; at least the initial size). Zero means DefaultReserve.
	Reserve uint64
	// FixedBase makes Grow fail with ErrWouldMove, the buffer unchanged, when the driver
	// will not extend the reservation in place, instead of remapping the buffer at a new
	// base address.
	FixedBase bool
}

// Stats describe a Buffer.
type Stats struct {
	Size         uint64 // bytes in use (Size)
	Committed    uint64 // bytes of physical memory mapped
	Reserved     uint64 // bytes of virtual address space reserved
	Granularity  uint64 // allocation granularity
	Chunks       int    // physical allocations
	Reservations int    // address ranges (1 + extensions since the last remap)
	Grows        int    // growths that committed memory
	Shrinks      int    // shrinks that released memory
	Extends      int    // reservations extended in place (hint honoured)
	HintsRefused int    // extensions the driver placed elsewhere
	Remaps       int    // times the buffer moved to a larger range (base changed)
	Calls        int    // driver calls made by New, Grow, Shrink and Close (not copies)
	Pending      int    // failed releases kept for retry by later operations and Close
}

// Chunk is one physical allocation of a Buffer, mapped whole at Offset.
type Chunk struct {
	Offset uint64
	Size   uint64
	Handle cu.MemHandle // owned by the Buffer: valid until it is shrunk away or closed
}

// span is one reservation; the spans of a buffer are contiguous, the first at the base.
type span struct {
	base cu.DevicePtr
	size uint64
}

// cleanup is one driver call that releases something: an undo step of a transaction, or
// a release that failed and waits for a retry.
type cleanup struct {
	what string
	do   func() error
	// restore marks undo steps that put back the buffer's own mappings; if one fails the
	// buffer is broken, where a failed release only leaks until it is retried.
	restore bool
}

// Buffer is a growable device buffer with a stable base address; see the package
// documentation.
//
// A Buffer is safe for concurrent use: Grow, Shrink and Close are serialized (each changes
// the buffer's chunks and reservations, one driver call after another, and waits for the
// copies in flight), and ReadAt, WriteAt and the accessors run alongside each other. What the lock cannot cover is
// device code: a device address taken from Base is valid until a Shrink releases the
// memory behind it, a Grow moves the buffer (Stats.Remaps; never with FixedBase) or Close,
// so the caller must not run kernels on the buffer during those.
type Buffer struct {
	mu sync.RWMutex

	b      vmm.Backend
	prop   cu.MemAllocationProp
	loc    string
	g      uint64
	dev    int
	access []cu.MemAccessDesc
	policy Policy
	minC   uint64
	maxC   uint64
	fixed  bool

	spans     []span  // contiguous reservations, spans[0].base is the base
	chunks    []chunk // sorted by offset, contiguous from 0, each inside one span
	size      uint64
	committed uint64
	reserved  uint64

	pending []cleanup
	broken  error
	closed  bool
	st      Stats
}

type chunk struct {
	h    cu.MemHandle
	off  uint64
	size uint64
}

// New returns a buffer of size bytes (zero is fine) with the given options.
func New(m *vmm.Manager, size uint64, opts Options) (*Buffer, error) {
	fail := func(err error) (*Buffer, error) {
		return nil, &Error{Op: "new", Args: vmm.Size(size), Err: err}
	}
	if m == nil || m.Backend() == nil {
		return fail(fmt.Errorf("%w: nil Manager", ErrInvalid))
	}
	if opts.Policy != Geometric && opts.Policy != Exact {
		return fail(fmt.Errorf("%w: policy %v", ErrInvalid, opts.Policy))
	}
	props := vmm.DeviceProps(opts.Device)
	if opts.Props != nil {
		props = *opts.Props
	}
	b := &Buffer{
		b:      m.Backend(),
		prop:   props.Driver(),
		loc:    props.Location.String(),
		dev:    opts.Device,
		policy: opts.Policy,
		fixed:  opts.FixedBase,
	}
	devs := []int{opts.Device}
	for _, d := range opts.Access {
		if d != opts.Device && !slices.Contains(devs, d) {
			devs = append(devs, d)
		}
	}
	b.access = vmm.ReadWrite(devs...)

	b.st.Calls++
	g, err := b.b.Granularity(&b.prop, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
	if err != nil {
		return fail(vmm.Call(err, "granularity of %s", b.loc))
	}
	if g == 0 || g&(g-1) != 0 {
		return fail(fmt.Errorf("%w: driver granularity %d is not a power of two", ErrInvalid, g))
	}
	b.g = g
	var ok bool
	if b.minC, ok = alignUp(opts.MinChunk, g); !ok {
		return fail(fmt.Errorf("%w: MinChunk %d", ErrTooLarge, opts.MinChunk))
	}
	if b.maxC, ok = alignUp(opts.MaxChunk, g); !ok {
		return fail(fmt.Errorf("%w: MaxChunk %d", ErrTooLarge, opts.MaxChunk))
	}
	res := opts.Reserve
	if res == 0 {
		res = DefaultReserve
	}
	res = max(res, size, 1)
	if res, ok = alignUp(res, g); !ok {
		return fail(fmt.Errorf("%w: reserve %d", ErrTooLarge, res))
	}
	base, err := b.reserve(res, 0)
	if err != nil {
		return fail(err)
	}
	b.spans = []span{{base, res}}
	b.reserved = res
	if size > 0 {
		if err := b.grow(size); err != nil {
			return fail(errors.Join(err, b.closeLocked()))
		}
	}
	return b, nil
}

// Base is the buffer's first device address. It changes only when a Grow remaps the
// buffer (never with Options.FixedBase); it is 0 after Close.
func (b *Buffer) Base() cu.DevicePtr {
	if b == nil {
		return 0
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.base()
}

func (b *Buffer) base() cu.DevicePtr {
	if len(b.spans) == 0 {
		return 0
	}
	return b.spans[0].base
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 {
	if b == nil {
		return 0
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.size
}

// Granularity is the allocation granularity: chunks and reservations are multiples of it.
func (b *Buffer) Granularity() uint64 {
	if b == nil {
		return 0
	}
	return b.g
}

// Stats returns the buffer's sizes and counters.
func (b *Buffer) Stats() Stats {
	if b == nil {
		return Stats{}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	s := b.st
	s.Size, s.Committed, s.Reserved, s.Granularity = b.size, b.committed, b.reserved, b.g
	s.Chunks, s.Reservations, s.Pending = len(b.chunks), len(b.spans), len(b.pending)
	return s
}

// Chunks lists the buffer's physical allocations in address order, for callers that share
// them (export to another process, bind to a multicast object).
func (b *Buffer) Chunks() []Chunk {
	if b == nil {
		return nil
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]Chunk, len(b.chunks))
	for i, c := range b.chunks {
		out[i] = Chunk{Offset: c.off, Size: c.size, Handle: c.h}
	}
	return out
}

func (b *Buffer) usable() error {
	if b == nil {
		return fmt.Errorf("%w: nil Buffer", ErrInvalid)
	}
	if b.closed {
		return ErrClosed
	}
	if b.broken != nil {
		return b.broken
	}
	return nil
}

// Grow makes the buffer at least n bytes long, committing memory if it needs more than is
// committed; a smaller n does nothing. The bytes already written keep their addresses and
// values. On error the buffer is unchanged.
func (b *Buffer) Grow(n uint64) error {
	return b.resize("grow", n, b.grow)
}

// resize runs Grow's or Shrink's work under the lock and names the operation on error,
// with the size and commitment as they were before it.
func (b *Buffer) resize(op string, n uint64, do func(uint64) error) error {
	if b == nil {
		return &Error{Op: op, Args: "to " + vmm.Size(n), Err: fmt.Errorf("%w: nil Buffer", ErrInvalid)}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	size, committed := b.size, b.committed
	args := func() string {
		return fmt.Sprintf("to %s (size %s, committed %s)", vmm.Size(n), vmm.Size(size), vmm.Size(committed))
	}
	if err := b.usable(); err != nil {
		return &Error{Op: op, Args: args(), Err: err}
	}
	if err := do(n); err != nil {
		return &Error{Op: op, Args: args(), Err: err}
	}
	return nil
}

func (b *Buffer) grow(n uint64) error {
	if n <= b.size {
		return nil
	}
	b.retryPending()
	target, ok := alignUp(n, b.g)
	if !ok {
		return ErrTooLarge
	}
	if target <= b.committed {
		b.size = n
		return nil
	}
	need := target - b.committed
	c := max(need, b.minC)
	if b.policy == Geometric {
		c = max(c, b.committed)
		if b.maxC != 0 {
			c = max(min(c, b.maxC), need)
		}
	}
	if _, carry := bits.Add64(b.committed, c, 0); carry != 0 {
		c = need
	}
	err := b.growBy(c)
	// A geometric chunk may not fit where the exact one would: try that before failing.
	if err != nil && c > need && errors.Is(err, cu.ERROR_OUT_OF_MEMORY) {
		err = b.growBy(need)
	}
	if err != nil {
		return err
	}
	b.size = n
	b.st.Grows++
	return nil
}

// growBy commits one more chunk of c bytes (two when it straddles the end of a
// reservation), extending or moving the reservation first if it is full.
func (b *Buffer) growBy(c uint64) error {
	end := b.committed + c
	t := &tx{b: b}
	spans := b.spans
	var old []span // reservations to release once the buffer has moved
	extended, refused := false, false
	if end > b.reserved {
		want := end
		if d, carry := bits.Add64(b.reserved, b.reserved, 0); carry == 0 {
			want = max(want, d) // double the address space, like the blog's vector
		}
		ext := want - b.reserved
		hint := b.base() + cu.DevicePtr(b.reserved)
		got, err := b.reserve(ext, hint)
		if err != nil {
			return err
		}
		if got == hint {
			t.push(cleanup{what: "free extension", do: func() error { return b.free(got, ext) }})
			spans = append(spans[:len(spans):len(spans)], span{got, ext})
			extended = true
		} else {
			refused = true
			// The range the driver chose is no use: give it back at once. If that fails it
			// is kept for a retry; it is not the buffer's, so growth goes on.
			if got != 0 {
				if err := b.free(got, ext); err != nil {
					b.pending = append(b.pending, cleanup{what: "free refused extension", do: func() error { return b.free(got, ext) }})
				}
			}
			if b.fixed {
				b.st.HintsRefused++
				return fmt.Errorf("%w: the driver placed the extension at %v, not %v", ErrWouldMove, got, hint)
			}
			nb, err := b.reserve(want, 0)
			if err != nil {
				return t.fail(err)
			}
			t.push(cleanup{what: "free new range", do: func() error { return b.free(nb, want) }})
			// Map the same physical chunks at the new range while the old mappings stay:
			// the driver maps one allocation at two addresses, and the buffer stays valid
			// at its old base until everything at the new one is in place.
			for _, ch := range b.chunks {
				va := nb + cu.DevicePtr(ch.off)
				if err := b.mapAt(va, ch.size, ch.h); err != nil {
					return t.fail(err)
				}
				t.push(cleanup{what: "unmap new range", do: func() error { return b.unmap(va, ch.size) }})
			}
			old = b.spans
			spans = []span{{nb, want}}
		}
	}

	// The new chunk, split where it crosses from one reservation into the next so that
	// every mapping lies inside one reservation: then each reservation can be unmapped and
	// freed on its own (the driver refuses to free a reservation a mapping runs out of).
	base := spans[0].base
	var added []chunk
	for _, seg := range segments(spans, b.committed, end) {
		h, err := b.create(seg.size)
		if err != nil {
			return t.fail(err)
		}
		t.push(cleanup{what: "release new chunk", do: func() error { return b.release(h) }})
		va := base + cu.DevicePtr(seg.off)
		if err := b.mapAt(va, seg.size, h); err != nil {
			return t.fail(err)
		}
		t.push(cleanup{what: "unmap new chunk", do: func() error { return b.unmap(va, seg.size) }})
		added = append(added, chunk{h: h, off: seg.off, size: seg.size})
	}
	// Access: one call over everything new, for every device. After a move that is the
	// whole buffer, every chunk adjacent in one reservation; otherwise the new chunk, whose
	// pieces may lie in two adjacent reservations. The driver takes one call over adjacent
	// mappings, also across reservations (recorded on H100 and H200: sim/internal/probe).
	from := b.committed
	if old != nil {
		from = 0
	}
	if err := b.setAccess(base+cu.DevicePtr(from), end-from); err != nil {
		return t.fail(err)
	}

	// Commit. Nothing below can leave the buffer inconsistent.
	oldCommitted := b.committed
	b.spans = spans
	b.chunks = append(b.chunks, added...)
	b.committed = end
	b.reserved = 0
	for _, s := range spans {
		b.reserved += s.size
	}
	if extended {
		b.st.Extends++
	}
	if refused {
		b.st.HintsRefused++
	}
	if old != nil {
		b.st.Remaps++
		b.releaseSpans(old, oldCommitted)
	}
	return nil
}

// releaseSpans unmaps the first committed bytes of the contiguous reservations spans and
// frees them; failures are kept for retry.
func (b *Buffer) releaseSpans(spans []span, committed uint64) {
	b.unmapSpans(spans, committed)
	b.freeSpans(spans)
}

// unmapSpans unmaps the first committed bytes of the contiguous reservations spans, one
// call per reservation (the driver unmaps adjacent mappings in one call).
func (b *Buffer) unmapSpans(spans []span, committed uint64) {
	if len(spans) == 0 {
		return
	}
	base := spans[0].base
	for _, seg := range segments(spans, 0, committed) {
		va, n := base+cu.DevicePtr(seg.off), seg.size
		if err := b.unmap(va, n); err != nil {
			b.pending = append(b.pending, cleanup{what: "unmap", do: func() error { return b.unmap(va, n) }})
		}
	}
}

func (b *Buffer) freeSpans(spans []span) {
	for _, s := range spans {
		if err := b.free(s.base, s.size); err != nil {
			b.pending = append(b.pending, cleanup{what: "free", do: func() error { return b.free(s.base, s.size) }})
		}
	}
}

// Shrink makes the buffer n bytes long if it is longer, and releases the chunks that lie
// wholly past n (with the geometric policy the last chunk kept may extend past it). The
// reservation is kept, so the buffer can grow back in place. On error the buffer is
// unchanged.
func (b *Buffer) Shrink(n uint64) error {
	return b.resize("shrink", n, b.shrink)
}

func (b *Buffer) shrink(n uint64) error {
	if n >= b.size {
		return nil
	}
	b.retryPending()
	k := len(b.chunks)
	for k > 0 && b.chunks[k-1].off >= n {
		k--
	}
	if k == len(b.chunks) {
		b.size = n
		return nil
	}
	from := b.chunks[k].off
	t := &tx{b: b}
	base := b.base()
	segs := segments(b.spans, from, b.committed)
	// One unmap per reservation the tail lies in (the driver unmaps adjacent mappings in one
	// call), last first; undone by mapping the same chunks back.
	for i := len(segs) - 1; i >= 0; i-- {
		seg := segs[i]
		va := base + cu.DevicePtr(seg.off)
		if err := b.unmap(va, seg.size); err != nil {
			return t.fail(err)
		}
		var back []chunk
		for _, ch := range b.chunks[k:] {
			if ch.off >= seg.off && ch.off < seg.off+seg.size {
				back = append(back, ch)
			}
		}
		t.push(cleanup{what: "restore unmapped chunks", restore: true, do: func() error {
			for j, ch := range back {
				if err := b.mapAt(base+cu.DevicePtr(ch.off), ch.size, ch.h); err != nil {
					for _, m := range back[:j] {
						_ = b.unmap(base+cu.DevicePtr(m.off), m.size)
					}
					return err
				}
			}
			return b.setAccess(va, seg.size)
		}})
	}
	tail := b.chunks[k:]
	b.chunks = b.chunks[:k:k]
	b.committed = from
	b.size = n
	b.st.Shrinks++
	for _, ch := range tail {
		if err := b.release(ch.h); err != nil {
			b.pending = append(b.pending, cleanup{what: "release shrunk chunk", do: func() error { return b.release(ch.h) }})
		}
	}
	return nil
}

// Close unmaps and releases every chunk and frees the reservations. It is idempotent:
// after a Close that returned nil, Close returns nil; after one that failed (the driver
// refusing a release), a later Close retries what failed.
func (b *Buffer) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.closeLocked(); err != nil {
		return &Error{Op: "close", Err: err}
	}
	return nil
}

func (b *Buffer) closeLocked() error {
	if !b.closed {
		b.closed = true
		// Unmap, release, free: pending keeps this order for the retries, since a
		// reservation can only be freed once nothing is mapped in it.
		b.unmapSpans(b.spans, b.committed)
		for _, ch := range b.chunks {
			if err := b.release(ch.h); err != nil {
				b.pending = append(b.pending, cleanup{what: "release", do: func() error { return b.release(ch.h) }})
			}
		}
		b.freeSpans(b.spans)
		b.chunks, b.spans = nil, nil
		b.size, b.committed, b.reserved = 0, 0, 0
	}
	return b.retryPending()
}

// retryPending retries the failed releases in order, keeping those that fail again.
func (b *Buffer) retryPending() error {
	var errs []error
	var left []cleanup
	for _, c := range b.pending {
		if err := c.do(); err != nil {
			left = append(left, c)
			errs = append(errs, fmt.Errorf("%s: %w", c.what, err))
		}
	}
	b.pending = left
	return errors.Join(errs...)
}

// ReadAt reads len(p) bytes at offset off of the buffer into p, from the context of
// Options.Device. It is safe alongside other ReadAt and WriteAt calls.
func (b *Buffer) ReadAt(p []byte, off int64) (int, error) {
	return b.copyAt("read", p, off, func(va cu.DevicePtr, q []byte) error { return b.b.CopyDtoH(b.dev, q, va) })
}

// WriteAt writes p at offset off of the buffer, from the context of Options.Device.
func (b *Buffer) WriteAt(p []byte, off int64) (int, error) {
	return b.copyAt("write", p, off, func(va cu.DevicePtr, q []byte) error { return b.b.CopyHtoD(b.dev, va, q) })
}

func (b *Buffer) copyAt(op string, p []byte, off int64, cp func(cu.DevicePtr, []byte) error) (int, error) {
	args := func() string { return fmt.Sprintf("%s at offset %d", vmm.Size(uint64(len(p))), off) }
	if b == nil {
		return 0, &Error{Op: op, Args: args(), Err: fmt.Errorf("%w: nil Buffer", ErrInvalid)}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable(); err != nil {
		return 0, &Error{Op: op, Args: args(), Err: err}
	}
	if off < 0 || uint64(off) > b.size || uint64(len(p)) > b.size-uint64(off) {
		return 0, &Error{Op: op, Args: args(), Err: fmt.Errorf("%w: size %s", ErrOutOfRange, vmm.Size(b.size))}
	}
	// One copy per chunk: each chunk is its own allocation, and whether the driver copies
	// across two of them in one call is not recorded.
	base, start, done := b.base(), uint64(off), 0
	for _, ch := range b.chunks {
		if len(p) == done {
			break
		}
		pos := start + uint64(done)
		if pos >= ch.off+ch.size {
			continue
		}
		n := min(uint64(len(p)-done), ch.off+ch.size-pos)
		va := base + cu.DevicePtr(pos)
		if err := cp(va, p[done:done+int(n)]); err != nil {
			return done, &Error{Op: op, Args: args(), Err: vmm.Call(err, "copy %v+%s from device %d", va, vmm.Size(n), b.dev)}
		}
		done += int(n)
	}
	return done, nil
}

// tx collects the undo steps of one operation.
type tx struct {
	b    *Buffer
	undo []cleanup
}

func (t *tx) push(c cleanup) { t.undo = append(t.undo, c) }

// fail undoes the transaction, last step first, and returns err. An undo step that fails
// is kept for retry when it releases something, and breaks the buffer when it was
// restoring the buffer's own mappings.
func (t *tx) fail(err error) error {
	for i := len(t.undo) - 1; i >= 0; i-- {
		c := t.undo[i]
		if uerr := c.do(); uerr != nil {
			if c.restore {
				t.b.broken = fmt.Errorf("%w: %s: %v (after %v)", ErrBroken, c.what, uerr, err)
				err = errors.Join(err, t.b.broken)
				continue
			}
			t.b.pending = append(t.b.pending, c)
		}
	}
	t.undo = nil
	return err
}

// seg is a range of buffer offsets.
type seg struct{ off, size uint64 }

// segments cuts [from, to) at the boundaries of the contiguous reservations spans.
func segments(spans []span, from, to uint64) []seg {
	var out []seg
	var pos uint64
	for _, s := range spans {
		lo, hi := max(from, pos), min(to, pos+s.size)
		if lo < hi {
			out = append(out, seg{lo, hi - lo})
		}
		pos += s.size
	}
	return out
}

// The driver calls, counted and named for errors. The names are formatted only when a
// call fails: growth makes thousands of these calls and most succeed.

func (b *Buffer) reserve(size uint64, hint cu.DevicePtr) (cu.DevicePtr, error) {
	b.st.Calls++
	va, err := b.b.Reserve(size, 0, hint, 0)
	if err != nil {
		return va, vmm.Call(err, "reserve %s hint %v", vmm.Size(size), hint)
	}
	return va, nil
}

func (b *Buffer) free(va cu.DevicePtr, size uint64) error {
	b.st.Calls++
	if err := b.b.Free(va, size); err != nil {
		return vmm.Call(err, "free %v+%s", va, vmm.Size(size))
	}
	return nil
}

func (b *Buffer) create(size uint64) (cu.MemHandle, error) {
	b.st.Calls++
	prop := b.prop
	h, err := b.b.Create(size, &prop, 0)
	if err != nil {
		return h, vmm.Call(err, "create %s on %s", vmm.Size(size), b.loc)
	}
	return h, nil
}

func (b *Buffer) release(h cu.MemHandle) error {
	b.st.Calls++
	if err := b.b.Release(h); err != nil {
		return vmm.Call(err, "release %v", h)
	}
	return nil
}

func (b *Buffer) mapAt(va cu.DevicePtr, size uint64, h cu.MemHandle) error {
	b.st.Calls++
	if err := b.b.Map(va, size, 0, h, 0); err != nil {
		return vmm.Call(err, "map %v+%s %v", va, vmm.Size(size), h)
	}
	return nil
}

func (b *Buffer) unmap(va cu.DevicePtr, size uint64) error {
	b.st.Calls++
	if err := b.b.Unmap(va, size); err != nil {
		return vmm.Call(err, "unmap %v+%s", va, vmm.Size(size))
	}
	return nil
}

func (b *Buffer) setAccess(va cu.DevicePtr, size uint64) error {
	b.st.Calls++
	if err := b.b.SetAccess(va, size, b.access); err != nil {
		return vmm.Call(err, "set access %v+%s %s", va, vmm.Size(size), accessString(b.access))
	}
	return nil
}

// alignUp rounds n up to a multiple of g (a power of two); ok is false on overflow.
func alignUp(n, g uint64) (uint64, bool) {
	r := (n + g - 1) &^ (g - 1)
	return r, r >= n
}

func accessString(d []cu.MemAccessDesc) string {
	s := ""
	for i, a := range d {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("rw device %d", a.Location.ID)
	}
	return s
}
