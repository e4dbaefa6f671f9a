// Package sparse is a sparse device array: one large reservation of virtual address space
// whose pages get physical memory when first used and can give it back.
//
// An Array reserves its whole size at once (address space costs no device memory: a
// 64 TiB reservation succeeds on an H100) and commits a page (an allocation of PageSize
// bytes, mapped whole, since the driver maps whole allocations only) the first time a
// range that touches it is committed or written. Decommit unmaps and releases pages, so a
// KV cache or a sparse table pays device memory only for what it holds. Stats reports the
// occupancy. ExportDmaBuf exports a committed range, all its pages, as one dma-buf
// descriptor for an RDMA NIC.
//
// Operations are vmm.Tx transactions: if a driver call fails midway, the pages the call
// had committed are released again, the pages it had decommitted are mapped back, and the
// array is unchanged. A release the driver refuses is kept and retried by later calls and
// by Close (Stats.Pending). Errors are *vmm.Error values of package "sparse" and match vmm's
// sentinels (vmm.ErrClosed, vmm.ErrOutOfRange, ...) and the driver's results with errors.Is.
package sparse

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// Options configure an Array. The zero value is device 0 memory in pages of the
// allocation granularity, accessible read-write from device 0.
type Options struct {
	// Device owns the physical memory unless Props says otherwise; copies are issued from
	// its context.
	Device int
	// Props, when set, describes the physical memory instead of Device. What the device
	// says it lacks (GPUDirect RDMA, compression, host memory, a handle type) fails New
	// with vmm.ErrUnsupported.
	Props *vmm.Props
	// Access lists who may access committed pages, and how: vmm.ReadWrite(0, 1), or
	// append(vmm.ReadWrite(0), vmm.ReadOnly(1)...). Device gets read-write access unless
	// the list names it.
	Access []cu.MemAccessDesc
	// PageSize is the unit of commitment, rounded up to the allocation granularity. Zero
	// means the granularity (2 MiB on Hopper).
	PageSize uint64
	// Zero fills newly committed pages with zeros, so that bytes never written read as
	// zero whether or not their page is committed. Without it a fresh page holds whatever
	// the driver gives.
	Zero bool
}

// Stats describe an Array's occupancy.
type Stats struct {
	Size          uint64  // bytes reserved (the array's size, a multiple of PageSize)
	PageSize      uint64  // bytes per page
	Pages         int     // pages in the array
	Committed     int     // pages with physical memory
	CommittedSize uint64  // bytes of physical memory
	Occupancy     float64 // Committed / Pages
	Peak          int     // the most pages committed at once
	Commits       int     // pages committed so far
	Decommits     int     // pages decommitted so far
	// Calls counts the driver calls made (not copies, the attribute queries that check
	// Options.Props, the calls that undo a failed operation, or retries of a release).
	// Close unmaps every page in one call.
	Calls   int
	Pending int // failed releases kept for retry
}

// Range is a range of array offsets.
type Range struct {
	Offset, Size uint64
}

// Array is a sparse device array; see the package documentation. It is safe for concurrent
// use: Commit, Decommit, Close and the commits WriteAt makes are serialized (they change the
// array's page table, one driver call after another); ReadAt, WriteAt to committed pages
// and the accessors run alongside each other, and Commit, Decommit and Close wait for the
// copies in flight. Device code must not touch a page while it is being decommitted.
//
// Only New makes one: a nil or zero Array fails every operation with vmm.ErrInvalid.
type Array struct {
	mu sync.RWMutex

	m      *vmm.Manager
	props  vmm.Props
	dev    int
	access []cu.MemAccessDesc
	zero   bool
	page   uint64
	g      *vmm.Region // its chunks are the committed pages

	pending vmm.Pending // and whether a failed undo broke the array
	closed  bool
	st      Stats
}

var errNoArray = fmt.Errorf("%w: a nil or zero Array (make one with New)", vmm.ErrInvalid)

// opErr names op and its arguments in err; a nil err stays nil.
func opErr(op, args string, err error) error {
	if err == nil {
		return nil
	}
	return &vmm.Error{Pkg: "sparse", Op: op, Args: args, Err: err}
}

// New reserves size bytes (rounded up to the page size) of address space.
func New(m *vmm.Manager, size uint64, opts Options) (*Array, error) {
	fail := func(err error) (*Array, error) { return nil, opErr("new", units.Size(size), err) }
	if size == 0 {
		return fail(fmt.Errorf("%w: zero size", vmm.ErrInvalid))
	}
	props := vmm.DeviceProps(opts.Device)
	if opts.Props != nil {
		props = *opts.Props
	}
	a := &Array{m: m, props: props, dev: opts.Device, zero: opts.Zero}
	a.access = slices.Clone(opts.Access)
	if !slices.ContainsFunc(opts.Access, func(d cu.MemAccessDesc) bool { return d.Location == vmm.OnDevice(opts.Device) }) {
		a.access = append(vmm.ReadWrite(opts.Device), opts.Access...)
	}
	if err := m.CheckProps(props, opts.Device); err != nil {
		return fail(err)
	}
	a.st.Calls++
	g, err := m.Granularity(props, false)
	if err != nil {
		return fail(err)
	}
	if g == 0 || g&(g-1) != 0 {
		return fail(fmt.Errorf("%w: driver granularity %d", vmm.ErrInvalid, g))
	}
	page, ok := units.AlignUp(max(opts.PageSize, g), g)
	if !ok {
		return fail(fmt.Errorf("%w: page size %d", vmm.ErrTooLarge, opts.PageSize))
	}
	// A page is a multiple of the granularity but not always a power of two: round by
	// division.
	total := (size + page - 1) / page * page
	if total < size {
		return fail(fmt.Errorf("%w: size overflows", vmm.ErrTooLarge))
	}
	a.page = page
	a.st.Calls++
	// Aligned to the page size, so that pages are aligned to their own size (the driver
	// places large pages best on aligned addresses).
	align := uint64(0)
	if page&(page-1) == 0 {
		align = page
	}
	if a.g, err = m.NewRegion(total, opts.Device, vmm.WithAlignment(align)); err != nil {
		return fail(err)
	}
	return a, nil
}

// Base is the array's first device address; it never changes.
func (a *Array) Base() cu.DevicePtr {
	if a == nil {
		return 0
	}
	return a.g.Base()
}

// Size is the array's size in bytes, a multiple of PageSize.
func (a *Array) Size() uint64 {
	if a == nil {
		return 0
	}
	return a.g.Size()
}

// PageSize is the unit of commitment.
func (a *Array) PageSize() uint64 {
	if a == nil {
		return 0
	}
	return a.page
}

// Regions returns the array's address range and committed pages, to tag with package
// sleep (sleep.Memory): while its pages sleep, Commit, Decommit and writes that commit
// fail with vmm.ErrAsleep, and copies over offloaded or discarded pages too. The region is
// the array's: not to be closed or changed by the caller.
func (a *Array) Regions() []*vmm.Region {
	if a == nil {
		return nil
	}
	return []*vmm.Region{a.g}
}

// Committed reports whether the page holding offset off has physical memory.
func (a *Array) Committed(off uint64) bool {
	if a == nil || a.page == 0 {
		return false
	}
	return len(a.g.Chunks(off, 1)) > 0
}

// Stats returns the occupancy and counters.
func (a *Array) Stats() Stats {
	if a == nil {
		return Stats{}
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	s := a.st
	s.Size, s.PageSize = a.g.Size(), a.page
	s.Pages = int(s.Size / max(a.page, 1))
	s.CommittedSize = a.g.Used()
	s.Committed = int(s.CommittedSize / max(a.page, 1))
	if s.Pages > 0 {
		s.Occupancy = float64(s.Committed) / float64(s.Pages)
	}
	s.Pending = a.pending.Len()
	return s
}

// CommittedRanges lists the committed parts of the array, adjacent pages merged, in
// address order.
func (a *Array) CommittedRanges() []Range {
	if a == nil {
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []Range
	for _, c := range a.g.Chunks(0, a.g.Size()) {
		if k := len(out) - 1; k >= 0 && out[k].Offset+out[k].Size == c.Off {
			out[k].Size += a.page
		} else {
			out = append(out, Range{Offset: c.Off, Size: a.page})
		}
	}
	return out
}

// usable says why the array cannot be used, or nil.
func (a *Array) usable() error {
	switch {
	case a.m == nil:
		return errNoArray
	case a.closed:
		return vmm.ErrClosed
	}
	return a.pending.Broken()
}

// check validates [off, off+n) against the array and returns its first and last page.
func (a *Array) check(off, n uint64) (first, last uint64, err error) {
	size := a.g.Size()
	if n == 0 || off >= size || n > size-off {
		return 0, 0, fmt.Errorf("%w: array of %s", vmm.ErrOutOfRange, units.Size(size))
	}
	return off / a.page, (off + n - 1) / a.page, nil
}

// locked runs Commit's or Decommit's work under the lock, naming the operation on error.
func (a *Array) locked(op string, off, n uint64, do func(*Array, uint64, uint64) error) error {
	args := fmt.Sprintf("%#x+%s", off, units.Size(n))
	if a == nil {
		return opErr(op, args, errNoArray)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	err := a.usable()
	if err == nil {
		err = do(a, off, n)
	}
	return opErr(op, args, err)
}

// Commit gives physical memory to every page that [off, off+n) touches and has none. On
// error the array is unchanged.
func (a *Array) Commit(off, n uint64) error {
	return a.locked("commit", off, n, (*Array).commit)
}

func (a *Array) commit(off, n uint64) error {
	first, last, err := a.check(off, n)
	if err != nil {
		return err
	}
	_ = a.pending.Retry() // what fails again stays counted in Stats.Pending
	missing := a.runsIn(first, last+1, false)
	if len(missing) == 0 {
		return nil
	}
	tx := a.m.Begin(&a.pending)
	pages := 0
	for _, run := range missing {
		pages += len(run)
		mems := make([]*vmm.Allocation, len(run))
		for k := range run {
			a.st.Calls++
			mem, err := tx.Create(a.page, a.props)
			if err != nil {
				return tx.Rollback(err)
			}
			mems[k] = mem
		}
		off, size := run[0]*a.page, uint64(len(run))*a.page
		a.st.Calls += len(run) + 1
		if err := tx.Add(a.g, off, a.access, mems...); err != nil {
			return tx.Rollback(err)
		}
		if a.zero {
			a.st.Calls++
			if err := a.m.Fill(a.dev, a.g.Base()+cu.DevicePtr(off), 0, size); err != nil {
				return tx.Rollback(err)
			}
		}
	}
	tx.Commit()
	a.st.Commits += pages
	a.st.Peak = max(a.st.Peak, int(a.g.Used()/a.page))
	return nil
}

// Decommit releases the physical memory of every committed page lying wholly inside
// [off, off+n); pages the range only partly covers keep theirs. On error the array is
// unchanged.
func (a *Array) Decommit(off, n uint64) error {
	return a.locked("decommit", off, n, (*Array).decommit)
}

func (a *Array) decommit(off, n uint64) error {
	if _, _, err := a.check(off, n); err != nil {
		return err
	}
	_ = a.pending.Retry()
	first := (off + a.page - 1) / a.page
	end := (off + n) / a.page // exclusive
	gone := a.runsIn(first, end, true)
	if len(gone) == 0 {
		return nil
	}
	tx := a.m.Begin(&a.pending)
	var released []vmm.Chunk
	for _, run := range gone {
		// One unmap per run: the driver unmaps adjacent mappings in one call.
		a.st.Calls++
		cs, err := tx.Remove(a.g, run[0]*a.page, uint64(len(run))*a.page)
		if err != nil {
			return tx.Rollback(err)
		}
		released = append(released, cs...)
	}
	tx.Commit()
	// The pages are unmapped; releasing their memory cannot be undone, and a failure only
	// leaks until the retry.
	for _, c := range released {
		a.st.Calls++
		_ = a.pending.Do("release decommitted page", c.Alloc.Close)
	}
	a.st.Decommits += len(released)
	return nil
}

// runsIn lists the pages in [first, end) that are committed (or, with committed false,
// that are not), in order, by runs of adjacent ones: the indexes of each run.
func (a *Array) runsIn(first, end uint64, committed bool) [][]uint64 {
	var out [][]uint64
	cs := a.g.Chunks(first*a.page, (end-first)*a.page)
	for i := first; i < end; i++ {
		for len(cs) > 0 && cs[0].Off < i*a.page {
			cs = cs[1:]
		}
		if (len(cs) > 0 && cs[0].Off == i*a.page) != committed {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k][len(out[k])-1] == i-1 {
			out[k] = append(out[k], i)
		} else {
			out = append(out, []uint64{i})
		}
	}
	return out
}

// WriteAt writes p at offset off, committing the pages it touches first (from the context
// of Options.Device).
func (a *Array) WriteAt(p []byte, off int64) (int, error) {
	args := fmt.Sprintf("%s at offset %d", units.Size(uint64(len(p))), off)
	if a == nil {
		return 0, opErr("write", args, errNoArray)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, opErr("write", args, vmm.ErrOutOfRange)
	}
	// The copy runs under the shared lock, alongside other reads and writes; only pages
	// that need committing take the array's exclusive lock, and a Decommit that slips in
	// between sends the write round again.
	for {
		a.mu.RLock()
		err := a.usable()
		first, last, cerr := a.check(uint64(off), uint64(len(p)))
		if err == nil && cerr == nil && len(a.runsIn(first, last+1, false)) == 0 {
			// Every page is committed: one copy, which the driver makes across the pages'
			// allocations in one call (recorded: vmmtest data/copy-across-allocations).
			n, err := a.g.WriteAt(p, off)
			a.mu.RUnlock()
			return n, opErr("write", args, err)
		}
		a.mu.RUnlock()
		if err == nil {
			a.mu.Lock()
			if err = a.usable(); err == nil {
				err = a.commit(uint64(off), uint64(len(p))) // reports a range out of bounds
			}
			a.mu.Unlock()
		}
		if err != nil {
			return 0, opErr("write", args, err)
		}
	}
}

// ReadAt reads len(p) bytes at offset off. Bytes of pages that are not committed read as
// zero, and reading commits nothing.
func (a *Array) ReadAt(p []byte, off int64) (int, error) {
	args := fmt.Sprintf("%s at offset %d", units.Size(uint64(len(p))), off)
	if a == nil {
		return 0, opErr("read", args, errNoArray)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, opErr("read", args, vmm.ErrOutOfRange)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	err := a.usable()
	if err == nil {
		_, _, err = a.check(uint64(off), uint64(len(p)))
	}
	if err != nil {
		return 0, opErr("read", args, err)
	}
	n, err := a.read(p, uint64(off))
	return n, opErr("read", args, err)
}

// read reads p at off one run of pages committed alike at a time: one copy per committed
// run (the driver copies across the allocations of a run in one call, recorded: vmmtest
// data/copy-across-allocations), zeros for a run of pages that are not.
func (a *Array) read(p []byte, off uint64) (int, error) {
	cs := a.g.Chunks(off, uint64(len(p))) // the committed pages the range touches
	// committedAt reports whether the page at pos is committed; pos only grows.
	committedAt := func(pos uint64) bool {
		for len(cs) > 0 && cs[0].End() <= pos {
			cs = cs[1:]
		}
		return len(cs) > 0 && cs[0].Off <= pos
	}
	done, end := 0, off+uint64(len(p))
	for done < len(p) {
		pos := off + uint64(done)
		committed := committedAt(pos)
		next := (pos/a.page + 1) * a.page
		for next < end && committedAt(next) == committed {
			next += a.page
		}
		q := p[done : done+int(min(end, next)-pos)]
		if !committed {
			clear(q)
		} else if _, err := a.g.ReadAt(q, int64(pos)); err != nil {
			return done, err
		}
		done += len(q)
	}
	return done, nil
}

// ExportDmaBuf exports the n bytes at offset off of the array as one dma-buf descriptor
// (cuMemGetHandleForAddressRange), for an RDMA NIC to register: every page of the range,
// each its own allocation. Every page the range touches must be committed: the first that
// is not fails the export with vmm.ErrHole, naming it (CommittedRanges lists what can be
// exported). off and n must be multiples of the host page size (vmm.ErrMisaligned). Commit
// and Decommit wait for the export.
//
// The descriptor describes the pages committed when it was made: after a Decommit of one
// of them it describes memory the array no longer has there.
func (a *Array) ExportDmaBuf(off, n uint64, opts ...vmm.DmaBufOption) (*vmm.DmaBuf, error) {
	args := fmt.Sprintf("%#x+%s", off, units.Size(n))
	if a == nil {
		return nil, opErr("export dma-buf", args, errNoArray)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if err := a.usable(); err != nil {
		return nil, opErr("export dma-buf", args, err)
	}
	first, last, err := a.check(off, n)
	if err == nil && a.g.Asleep() {
		err = fmt.Errorf("%w: the array's pages sleep", vmm.ErrAsleep)
	}
	if err != nil {
		return nil, opErr("export dma-buf", args, err)
	}
	base := a.g.Base()
	var chunks []vmm.DmaBufChunk
	for _, c := range a.g.Chunks(first*a.page, (last+1-first)*a.page) {
		p, err := c.Alloc.Properties()
		if err != nil {
			return nil, opErr("export dma-buf", args, err)
		}
		chunks = append(chunks, vmm.DmaBufChunk{Addr: base + cu.DevicePtr(c.Off), Size: a.page, Props: p, Alloc: c.Alloc})
	}
	d, err := a.m.ExportDmaBufChunks(base+cu.DevicePtr(off), n, chunks, opts...)
	if err != nil {
		if gaps := a.runsIn(first, last+1, false); len(gaps) > 0 && errors.Is(err, vmm.ErrHole) {
			page := gaps[0][0]
			err = fmt.Errorf("%w: page %d (offset %#x of the array) is not committed", vmm.ErrHole, page, page*a.page)
		}
		return nil, opErr("export dma-buf", args, err)
	}
	return d, nil
}

// Close unmaps every page (in one driver call), frees the reservation and releases the
// pages' memory. It is idempotent; after a Close that failed, a later Close retries what
// failed.
func (a *Array) Close() error {
	if a == nil || a.m == nil {
		return opErr("close", "", errNoArray)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		pages := int(a.g.Used() / a.page)
		a.st.Calls += 1 + pages // free, and release each page
		if pages > 0 {
			a.st.Calls++ // one unmap of them all
		}
		_ = a.pending.Do("unmap, free and release", a.g.Close)
	}
	return opErr("close", "", a.pending.Retry())
}
