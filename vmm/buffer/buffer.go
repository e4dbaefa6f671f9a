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
// Each chunk is made as the buffer's Config says: its physical properties (device or host
// memory, shareable handle types, compression, GPUDirect RDMA) and who may access it, read
// and write or read only. Options give the first Config and SetConfig changes it for the
// chunks committed after, so that one buffer can hold, say, read-only and read-write
// ranges. A property the device says it lacks fails with vmm.ErrUnsupported before anything
// is allocated. Each growth grants access in one cuMemSetAccess call per reservation the new
// chunk lies in.
//
// When the reservation is full, the buffer asks for the range right after it (the
// fixed-address hint of cuMemAddressReserve) and keeps both reservations; if the driver
// places the range elsewhere (it may: seen on an H200), the buffer reserves a larger range,
// maps the same physical chunks there and releases the old range. No data is copied, but
// the base address changes: Stats.Remaps counts it, and Options.FixedBase makes such a
// growth fail with vmm.ErrWouldMove instead.
//
// ExportDmaBuf exports the committed memory, every chunk of it, as one dma-buf descriptor
// for an RDMA NIC. A descriptor describes the memory at its addresses when it was made:
// after a remap, or a Shrink that released memory of its range, Stale reports it stale.
//
// Every operation is a vmm.Tx: if a driver call fails midway, what the operation created is
// released and what it undid is restored, so the buffer is unchanged and usable, and nothing
// leaks. Releases that fail (the driver refusing to free something the buffer owns) are kept
// and retried by later operations and by Close; Stats.Pending counts them. Errors are
// *vmm.Error values of package "buffer" and match vmm's sentinels (vmm.ErrClosed,
// vmm.ErrInvalid, vmm.ErrOutOfRange, ...) and the driver's results with errors.Is.
package buffer

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
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
	if p != Geometric && p != Exact {
		return fmt.Sprintf("Policy(%d)", int(p))
	}
	return [...]string{Geometric: "geometric", Exact: "exact"}[p]
}

// DefaultReserve is the virtual address space a Buffer reserves up front when
// Options.Reserve is zero. Address space costs no physical memory, and a larger
// reservation means fewer extensions.
const DefaultReserve = 1 << 30

// Options configure a Buffer. The zero value is a buffer of device 0 memory, accessible
// read-write from device 0, with the geometric policy.
type Options struct {
	// Device owns the physical memory, unless Props says otherwise. Copies (ReadAt,
	// WriteAt) are issued from its context.
	Device int
	// Props, when set, describes the physical memory instead of Device (for example to
	// ask for shareable handle types, to export the chunks to another process).
	Props *vmm.Props
	// Access lists who may access the chunks, and how: vmm.ReadWrite(0, 1), or
	// append(vmm.ReadWrite(0), vmm.ReadOnly(1)...). Device gets read-write access unless
	// the list names it.
	Access []cu.MemAccessDesc
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
	// FixedBase makes Grow fail with vmm.ErrWouldMove, the buffer unchanged, when the
	// driver will not extend the reservation in place, instead of remapping the buffer at a
	// new base address.
	FixedBase bool
	// Recommended lays chunks and reservations out in the driver's recommended
	// granularity for the memory (cuda.core's granularity="recommended") instead of the
	// minimum; on Hopper both are 2 MiB.
	Recommended bool
}

// Config is how a Buffer makes the chunks it commits: their physical memory and who may
// access them (cuda.core's VirtualMemoryResourceOptions, less what concerns reservations).
type Config struct {
	// Props describes the physical memory. A zero Location means memory of
	// Options.Device.
	Props vmm.Props
	// Access lists who may access the chunks, and how, as Options.Access does.
	Access []cu.MemAccessDesc
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
	// Calls counts the driver calls made by New, Grow, Shrink, SetConfig and Close (not
	// copies, the attribute queries that check a Config, the calls that undo a failed
	// operation, or retries of a release). A growth inside one reservation makes three:
	// create, map, set access; a chunk that straddles two reservations is two allocations,
	// each mapped and given access on its own.
	Calls   int
	Pending int // failed releases kept for retry by later operations and Close
}

// Chunk is one physical allocation of a Buffer, mapped whole at Offset.
type Chunk struct {
	Offset uint64
	Size   uint64
	// Allocation is the chunk's memory, to export or bind. It is the Buffer's: valid until
	// a Shrink releases it or Close, and not to be closed by the caller.
	Allocation *vmm.Allocation
	Handle     cu.MemHandle // Allocation.Handle()
	Props      vmm.Props    // what the chunk was made with (Config.Props at its growth)
}

// chunk is one allocation, mapped whole at buffer offset off of the span that holds it
// (which holds the allocation: a sleep may put other memory in its place).
type chunk struct {
	off  uint64
	size uint64
	cfg  *Config // shared by the chunks made with one Config
	born uint64  // the buffer's generation when the chunk was made (dmabuf.go)
}

// Buffer is a growable device buffer with a stable base address; see the package
// documentation.
//
// A Buffer is safe for concurrent use: Grow, Shrink, SetConfig and Close are serialized
// (each changes the buffer's chunks and reservations, one driver call after another, and
// waits for the copies in flight), and ReadAt, WriteAt and the accessors run alongside each
// other. What the lock cannot cover is device code: a device address taken from Base is
// valid until a Shrink releases the memory behind it, a Grow moves the buffer
// (Stats.Remaps; never with FixedBase) or Close, so the caller must not run kernels on the
// buffer during those.
//
// Only New makes one: a nil or zero Buffer fails every operation with vmm.ErrInvalid.
type Buffer struct {
	mu sync.RWMutex

	m    *vmm.Manager
	opts Options // MinChunk and MaxChunk rounded up to g
	g    uint64
	cfg  *Config // for the chunks committed next

	spans     []*vmm.Region // contiguous reservations, spans[0] at the base, and their chunks
	chunks    []chunk       // sorted by offset, contiguous from 0, each inside one span
	size      uint64
	committed uint64
	reserved  uint64

	pending vmm.Pending // and whether a failed undo broke the buffer
	closed  bool
	st      Stats

	// gen is Generation; movedAt is its value after the last remap (dmabuf.go).
	gen, movedAt uint64
}

var errNoBuffer = fmt.Errorf("%w: a nil or zero Buffer (make one with New)", vmm.ErrInvalid)

// opErr names op and its arguments in err; a nil err stays nil.
func opErr(op, args string, err error) error {
	if err == nil {
		return nil
	}
	return &vmm.Error{Pkg: "buffer", Op: op, Args: args, Err: err}
}

// read returns what f reads of b under its shared lock, or the zero T for a nil Buffer.
func read[T any](b *Buffer, f func() T) T {
	if b == nil {
		var zero T
		return zero
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return f()
}

// New returns a buffer of size bytes (zero is fine) with the given options.
func New(m *vmm.Manager, size uint64, opts Options) (*Buffer, error) {
	fail := func(err error) (*Buffer, error) { return nil, opErr("new", units.Size(size), err) }
	if opts.Policy != Geometric && opts.Policy != Exact {
		return fail(fmt.Errorf("%w: policy %v", vmm.ErrInvalid, opts.Policy))
	}
	b := &Buffer{m: m, opts: opts}
	c := Config{Props: vmm.DeviceProps(opts.Device), Access: opts.Access}
	if opts.Props != nil {
		c.Props = *opts.Props
	}
	cfg, g, err := b.prepare(c)
	if err != nil {
		return fail(err)
	}
	b.cfg, b.g = cfg, g
	var ok bool
	if b.opts.MinChunk, ok = units.AlignUp(opts.MinChunk, g); !ok {
		return fail(fmt.Errorf("%w: MinChunk %d", vmm.ErrTooLarge, opts.MinChunk))
	}
	if b.opts.MaxChunk, ok = units.AlignUp(opts.MaxChunk, g); !ok {
		return fail(fmt.Errorf("%w: MaxChunk %d", vmm.ErrTooLarge, opts.MaxChunk))
	}
	res := opts.Reserve
	if res == 0 {
		res = DefaultReserve
	}
	if res, ok = units.AlignUp(max(res, size, 1), g); !ok {
		return fail(fmt.Errorf("%w: reserve %d", vmm.ErrTooLarge, max(opts.Reserve, size)))
	}
	r, err := b.reserve(nil, res, 0)
	if err != nil {
		return fail(err)
	}
	b.spans = []*vmm.Region{r}
	b.reserved = res
	if size > 0 {
		if err := b.grow(size); err != nil {
			err = errors.Join(err, b.closeLocked())
			b.pending.MoveTo(m.Pending()) // no Buffer is returned to retry them on
			return fail(err)
		}
	}
	return b, nil
}

// prepare completes c (a zero Location is memory of the buffer's device, which gets
// read-write access unless c names it) and checks it before anything is allocated: what the
// device lacks fails with vmm.ErrUnsupported. It returns the granularity of c's memory:
// queried in New (b.g is 0) and when the properties change, which then must not need a
// coarser one than the chunks already laid out.
func (b *Buffer) prepare(c Config) (*Config, uint64, error) {
	if c.Props.Location == (vmm.Location{}) {
		c.Props.Location = vmm.OnDevice(b.opts.Device)
	}
	owner := vmm.OnDevice(b.opts.Device)
	named := false
	for _, d := range c.Access {
		if d.Location.Type != cu.MEM_LOCATION_TYPE_DEVICE {
			return nil, 0, fmt.Errorf("%w: access is granted to devices, not %v", vmm.ErrInvalid, d.Location)
		}
		named = named || d.Location == owner
	}
	if named {
		c.Access = slices.Clone(c.Access)
	} else {
		c.Access = append(vmm.ReadWrite(b.opts.Device), c.Access...)
	}
	if err := b.m.CheckProps(c.Props, b.opts.Device); err != nil {
		return nil, 0, err
	}
	if b.g != 0 && c.Props == b.cfg.Props {
		return &c, b.g, nil
	}
	b.st.Calls++
	g, err := b.m.Granularity(c.Props, b.opts.Recommended)
	if err != nil {
		return nil, 0, err
	}
	if g == 0 || g&(g-1) != 0 {
		return nil, 0, fmt.Errorf("%w: driver granularity %d is not a power of two", vmm.ErrInvalid, g)
	}
	if b.g != 0 && g > b.g {
		return nil, 0, fmt.Errorf("%w: %v needs a granularity of %s, the buffer's is %s", vmm.ErrInvalid, c.Props.Location, units.Size(g), units.Size(b.g))
	}
	return &c, max(g, b.g), nil
}

// Config returns how the buffer makes the chunks it commits next (nil Access for a nil or
// zero Buffer).
func (b *Buffer) Config() Config {
	return read(b, func() Config {
		if b.cfg == nil {
			return Config{}
		}
		return Config{Props: b.cfg.Props, Access: slices.Clone(b.cfg.Access)}
	})
}

// SetConfig changes how the chunks committed from now on are made: their physical
// properties and who may access them. Memory already committed keeps its own, including
// the geometric policy's chunks past Size (Chunks says what each was made with). A request
// the device says it cannot meet fails with vmm.ErrUnsupported, and properties that need a
// coarser granularity than the buffer's with vmm.ErrInvalid, before anything is allocated;
// on error the configuration is unchanged.
func (b *Buffer) SetConfig(c Config) error {
	if b == nil {
		return opErr("set config", "", errNoBuffer)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return opErr("set config", "", err)
	}
	cfg, _, err := b.prepare(c)
	if err == nil {
		b.cfg = cfg
	}
	return opErr("set config", fmt.Sprintf("%v access %v", c.Props.Location, c.Access), err)
}

// Base is the buffer's first device address. It changes only when a Grow remaps the
// buffer (never with Options.FixedBase); it is 0 after Close.
func (b *Buffer) Base() cu.DevicePtr { return read(b, b.base) }

func (b *Buffer) base() cu.DevicePtr {
	if len(b.spans) == 0 {
		return 0
	}
	return b.spans[0].Base()
}

// Size is the buffer's size in bytes.
func (b *Buffer) Size() uint64 {
	return read(b, func() uint64 { return b.size })
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
	return read(b, func() Stats {
		s := b.st
		s.Size, s.Committed, s.Reserved, s.Granularity = b.size, b.committed, b.reserved, b.g
		s.Chunks, s.Reservations, s.Pending = len(b.chunks), len(b.spans), b.pending.Len()
		return s
	})
}

// Chunks lists the buffer's physical allocations in address order, for callers that share
// them (export to another process, bind to a multicast object).
func (b *Buffer) Chunks() []Chunk {
	return read(b, func() []Chunk {
		allocs := b.allocs()
		out := make([]Chunk, len(b.chunks))
		for i, c := range b.chunks {
			out[i] = Chunk{Offset: c.off, Size: c.size, Allocation: allocs[i], Handle: allocs[i].Handle(), Props: c.cfg.Props}
		}
		return out
	})
}

// allocs returns the allocation of each chunk, b.chunks[i]'s at i: the spans' chunks, in
// order, are the buffer's.
func (b *Buffer) allocs() []*vmm.Allocation {
	out := make([]*vmm.Allocation, 0, len(b.chunks))
	for _, g := range b.spans {
		for _, c := range g.Chunks(0, g.Size()) {
			out = append(out, c.Alloc)
		}
	}
	return out
}

// Regions returns the buffer's reservations and the chunks in them, in address order, to
// tag with package sleep (sleep.Memory). They are the buffer's: not to be closed or
// changed by the caller. A Grow that moves the buffer replaces them.
func (b *Buffer) Regions() []*vmm.Region {
	return read(b, func() []*vmm.Region { return slices.Clone(b.spans) })
}

// usable says why the buffer cannot be used, or nil.
func (b *Buffer) usable() error {
	switch {
	case b.m == nil:
		return errNoBuffer
	case b.closed:
		return vmm.ErrClosed
	}
	return b.pending.Broken()
}

// changeable says why the buffer's chunks cannot change, or nil: a chunk of it sleeps
// (package sleep), and a new reservation would not.
func (b *Buffer) changeable() error {
	for _, g := range b.spans {
		if g.Asleep() {
			return fmt.Errorf("%w: the buffer's memory sleeps", vmm.ErrAsleep)
		}
	}
	return nil
}

// Grow makes the buffer at least n bytes long, committing memory if it needs more than is
// committed; a smaller n does nothing. The bytes already written keep their addresses and
// values. On error the buffer is unchanged.
func (b *Buffer) Grow(n uint64) error {
	return b.resize("grow", n, (*Buffer).grow)
}

// resize runs Grow's or Shrink's work under the lock and names the operation on error,
// with the size and commitment as they were before it.
func (b *Buffer) resize(op string, n uint64, do func(*Buffer, uint64) error) error {
	if b == nil {
		return opErr(op, "to "+units.Size(n), errNoBuffer)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	size, committed := b.size, b.committed
	args := func() string {
		return fmt.Sprintf("to %s (size %s, committed %s)", units.Size(n), units.Size(size), units.Size(committed))
	}
	if err := errors.Join(b.usable(), b.changeable()); err != nil {
		return opErr(op, args(), err)
	}
	if err := do(b, n); err != nil {
		return opErr(op, args(), err)
	}
	return nil
}

func (b *Buffer) grow(n uint64) error {
	if n <= b.size {
		return nil
	}
	_ = b.pending.Retry() // what fails again stays counted in Stats.Pending
	target, ok := units.AlignUp(n, b.g)
	if !ok {
		return vmm.ErrTooLarge
	}
	if target <= b.committed {
		b.size = n
		return nil
	}
	need := target - b.committed
	c := max(need, b.opts.MinChunk)
	if b.opts.Policy == Geometric {
		c = max(c, b.committed)
		if b.opts.MaxChunk != 0 {
			c = max(min(c, b.opts.MaxChunk), need)
		}
	}
	if _, carry := bits.Add64(b.committed, c, 0); carry != 0 {
		c = need
	}
	err := b.growBy(c)
	// A geometric chunk may not fit where the exact one would: try that before failing,
	// unless the failure broke the buffer (an undo failed too), which must be reported.
	if err != nil && c > need && errors.Is(err, cu.ERROR_OUT_OF_MEMORY) && !errors.Is(err, vmm.ErrBroken) {
		// The failed chunk's undo may have left a release for later (an unmap the driver
		// refused): it must be done before the smaller chunk goes where the larger one was.
		if rerr := b.pending.Retry(); rerr != nil {
			return errors.Join(err, rerr)
		}
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
	tx := b.m.Begin(&b.pending)
	spans := b.spans
	var old []*vmm.Region // reservations to free once the buffer has moved
	extended, refused := false, false
	reserved := b.reserved // after the growth
	if end > b.reserved {
		reserved = end
		if d, carry := bits.Add64(b.reserved, b.reserved, 0); carry == 0 {
			reserved = max(reserved, d) // double the address space, like the blog's vector
		}
		ext := reserved - b.reserved
		hint := b.base() + cu.DevicePtr(b.reserved)
		g, err := b.reserve(nil, ext, hint)
		if err != nil {
			return err
		}
		if g.Base() == hint {
			tx.OnRollback("free extension", g.Close)
			spans = append(slices.Clip(spans), g)
			extended = true
		} else {
			refused = true
			// The range the driver chose is no use: give it back at once. If that fails it
			// is kept for a retry; it is not the buffer's, so growth goes on.
			b.release("free refused extension", 1, g.Close)
			if b.opts.FixedBase {
				b.st.HintsRefused++
				return fmt.Errorf("%w: the driver placed the extension at %v, not %v", vmm.ErrWouldMove, g.Base(), hint)
			}
			ng, err := b.reserve(tx, reserved, 0)
			if err != nil {
				return tx.Rollback(err)
			}
			old, spans = b.spans, []*vmm.Region{ng}
		}
	}

	// The new chunk, split where it crosses from one reservation into the next so that
	// every mapping lies inside one reservation: then each reservation can be unmapped and
	// freed on its own (the driver refuses to free a reservation a mapping runs out of).
	var added []chunk
	var allocs []*vmm.Allocation
	for _, s := range segments(spans, b.committed, end) {
		b.st.Calls++
		a, err := tx.Create(s.size, b.cfg.Props)
		if err != nil {
			return tx.Rollback(err)
		}
		added = append(added, chunk{off: s.off, size: s.size, cfg: b.cfg})
		allocs = append(allocs, a)
	}
	if old == nil {
		if err := b.add(tx, spans, added, allocs); err != nil {
			return tx.Rollback(err)
		}
	} else {
		// Map the same physical chunks at the new range while the old mappings stay (the
		// driver maps one allocation at two addresses), so that the buffer stays valid at
		// its old base until everything at the new one is in place; then unmap the old.
		moved := append(slices.Clip(b.chunks), added...)
		if err := b.add(tx, spans, moved, append(b.allocs(), allocs...)); err != nil {
			return tx.Rollback(err)
		}
		for _, s := range segments(old, 0, b.committed) {
			b.st.Calls++
			if _, err := tx.Remove(s.g, 0, s.size); err != nil {
				return tx.Rollback(err)
			}
		}
	}
	tx.Commit()

	// Nothing below can leave the buffer inconsistent.
	if old != nil {
		b.gen++
		b.movedAt = b.gen
	}
	for i := range added {
		added[i].born = b.gen
	}
	b.spans = spans
	b.chunks = append(b.chunks, added...)
	b.committed = end
	b.reserved = reserved
	if extended {
		b.st.Extends++
	}
	if refused {
		b.st.HintsRefused++
	}
	if old != nil {
		b.st.Remaps++
		b.closeSpans(old)
	}
	return nil
}

// add maps chunks, which are adjacent, with their allocations allocs, in spans: one
// vmm.Tx.Add per run of chunks that share a reservation and an access list, so one access
// call each (the driver takes one call over adjacent mappings).
func (b *Buffer) add(tx *vmm.Tx, spans []*vmm.Region, chunks []chunk, allocs []*vmm.Allocation) error {
	start := uint64(0) // the buffer offset of spans[0]
	for i := 0; i < len(chunks); {
		for start+spans[0].Size() <= chunks[i].off { // spans[0] is to hold chunks[i]
			start += spans[0].Size()
			spans = spans[1:]
		}
		end := start + spans[0].Size()
		j := i + 1
		for j < len(chunks) && chunks[j].off < end && slices.Equal(chunks[j].cfg.Access, chunks[i].cfg.Access) {
			j++
		}
		b.st.Calls += j - i + 1
		if err := tx.Add(spans[0], chunks[i].off-start, chunks[i].cfg.Access, allocs[i:j]...); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// Shrink makes the buffer n bytes long if it is longer, and releases the chunks that lie
// wholly past n (with the geometric policy the last chunk kept may extend past it). The
// reservation is kept, so the buffer can grow back in place. On error the buffer is
// unchanged.
func (b *Buffer) Shrink(n uint64) error {
	return b.resize("shrink", n, (*Buffer).shrink)
}

func (b *Buffer) shrink(n uint64) error {
	if n >= b.size {
		return nil
	}
	_ = b.pending.Retry()
	k := len(b.chunks)
	for k > 0 && b.chunks[k-1].off >= n {
		k--
	}
	if k == len(b.chunks) {
		b.size = n
		return nil
	}
	from := b.chunks[k].off
	tx := b.m.Begin(&b.pending)
	segs := segments(b.spans, from, b.committed)
	// One unmap per reservation the tail lies in (the driver unmaps adjacent mappings in one
	// call), last first; undone by mapping the same chunks back.
	var tail []vmm.Chunk
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		b.st.Calls++
		cs, err := tx.Remove(s.g, s.at, s.size)
		if err != nil {
			return tx.Rollback(err)
		}
		tail = append(tail, cs...)
	}
	tx.Commit()
	b.chunks = b.chunks[:k:k]
	b.committed = from
	b.size = n
	b.st.Shrinks++
	b.gen++
	for _, c := range tail {
		b.release("release shrunk chunk", 1, c.Alloc.Close)
	}
	return nil
}

// Close unmaps and releases every chunk and frees the reservations. It is idempotent:
// after a Close that returned nil, Close returns nil; after one that failed (the driver
// refusing a release), a later Close retries what failed.
func (b *Buffer) Close() error {
	if b == nil || b.m == nil {
		return opErr("close", "", errNoBuffer)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return opErr("close", "", b.closeLocked())
}

func (b *Buffer) closeLocked() error {
	if !b.closed {
		b.closed = true
		b.closeSpans(b.spans)
		b.chunks, b.spans = nil, nil
		b.size, b.committed, b.reserved = 0, 0, 0
	}
	return b.pending.Retry()
}

// closeSpans unmaps, frees and releases the chunks of spans; failures are kept for a retry.
func (b *Buffer) closeSpans(spans []*vmm.Region) {
	for _, g := range spans {
		n := len(g.Chunks(0, g.Size()))
		calls := 1 + n // free, and release each chunk
		if n > 0 {
			calls++ // one unmap of them all
		}
		b.release("unmap, free and release", calls, g.Close)
	}
}

// ReadAt reads len(p) bytes at offset off of the buffer into p, from the context of
// Options.Device. It is safe alongside other ReadAt and WriteAt calls.
func (b *Buffer) ReadAt(p []byte, off int64) (int, error) {
	return b.copyAt("read", p, off, (*vmm.Region).ReadAt)
}

// WriteAt writes p at offset off of the buffer, from the context of Options.Device.
func (b *Buffer) WriteAt(p []byte, off int64) (int, error) {
	return b.copyAt("write", p, off, (*vmm.Region).WriteAt)
}

func (b *Buffer) copyAt(op string, p []byte, off int64, cp func(*vmm.Region, []byte, int64) (int, error)) (int, error) {
	args := func() string { return fmt.Sprintf("%s at offset %d", units.Size(uint64(len(p))), off) }
	if b == nil {
		return 0, opErr(op, args(), errNoBuffer)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable(); err != nil {
		return 0, opErr(op, args(), err)
	}
	if off < 0 || uint64(off) > b.size || uint64(len(p)) > b.size-uint64(off) {
		return 0, opErr(op, args(), fmt.Errorf("%w: size %s", vmm.ErrOutOfRange, units.Size(b.size)))
	}
	// One copy per reservation the range lies in: the driver copies across the
	// allocations of one in one call (recorded: vmmtest data/copy-across-allocations).
	done := 0
	for _, s := range segments(b.spans, uint64(off), uint64(off)+uint64(len(p))) {
		if _, err := cp(s.g, p[done:done+int(s.size)], int64(s.at)); err != nil {
			return done, opErr(op, args(), err)
		}
		done += int(s.size)
	}
	return done, nil
}

// seg is the size bytes at buffer offset off, which lie at offset at of the reservation g.
type seg struct {
	g             *vmm.Region
	at, off, size uint64
}

// segments cuts [from, to) at the boundaries of the contiguous reservations spans.
func segments(spans []*vmm.Region, from, to uint64) []seg {
	var out []seg
	start := uint64(0) // the buffer offset of g
	for _, g := range spans {
		lo, hi := max(from, start), min(to, start+g.Size())
		if lo < hi {
			out = append(out, seg{g, lo - start, lo, hi - lo})
		}
		start += g.Size()
	}
	return out
}

// The driver calls, counted for Stats.Calls.

// reserve reserves size bytes at hint (0: anywhere), undone by tx if there is one.
func (b *Buffer) reserve(tx *vmm.Tx, size uint64, hint cu.DevicePtr) (*vmm.Region, error) {
	b.st.Calls++
	if tx != nil {
		return tx.NewRegion(size, b.opts.Device, vmm.At(hint))
	}
	return b.m.NewRegion(size, b.opts.Device, vmm.At(hint))
}

// release runs do, which makes calls driver calls, and keeps it for a retry if it fails.
func (b *Buffer) release(what string, calls int, do func() error) {
	b.st.Calls += calls
	_ = b.pending.Do(what, do)
}
