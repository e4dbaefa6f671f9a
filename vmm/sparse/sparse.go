// Package sparse is a sparse device array: one large reservation of virtual address space
// whose pages get physical memory when first used and can give it back.
//
// An Array reserves its whole size at once (address space costs no device memory: a
// 64 TiB reservation succeeds on an H100) and commits a page (an allocation of PageSize
// bytes, mapped whole, since the driver maps whole allocations only) the first time a
// range that touches it is committed or written. Decommit unmaps and releases pages, so a
// KV cache or a sparse table pays device memory only for what it holds. Stats reports the
// occupancy.
//
// Operations are transactions: if a driver call fails midway, the pages the call had
// committed are released again, the pages it had decommitted are mapped back, and the
// array is unchanged. A release the driver refuses is kept and retried by later calls and
// by Close (Stats.Pending).
package sparse

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

var (
	// ErrClosed is returned by every operation on an Array after its Close.
	ErrClosed = errors.New("sparse: closed")
	// ErrOutOfRange is returned for ranges outside [0, Size).
	ErrOutOfRange = errors.New("sparse: out of range")
	// ErrInvalid is returned for invalid arguments.
	ErrInvalid = errors.New("sparse: invalid argument")
	// ErrBroken is returned once a rollback could not map decommitted pages back.
	ErrBroken = errors.New("sparse: broken by a failed rollback")
)

// Error is the error of a failed Array operation; it unwraps to the cause.
type Error struct {
	Op   string // "new", "commit", "decommit", "read", "write", "close"
	Args string
	Err  error
}

func (e *Error) Error() string {
	s := "sparse: " + e.Op
	if e.Args != "" {
		s += " " + e.Args
	}
	return s + ": " + strings.TrimPrefix(e.Err.Error(), "sparse: ")
}

func (e *Error) Unwrap() error { return e.Err }

// Options configure an Array. The zero value is device 0 memory in pages of the
// allocation granularity, accessible from device 0.
type Options struct {
	// Device owns the physical memory unless Props says otherwise; copies are issued from
	// its context.
	Device int
	// Props, when set, describes the physical memory instead of Device.
	Props *vmm.Props
	// Access lists the devices granted read-write access to committed pages; Device is
	// always included.
	Access []int
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
	Calls         int     // driver calls made (not counting copies)
	Pending       int     // failed releases kept for retry
}

// Range is a range of array offsets.
type Range struct {
	Offset, Size uint64
}

type cleanup struct {
	what    string
	do      func() error
	restore bool
}

// Array is a sparse device array; see the package documentation. It is safe for concurrent
// use: Commit, Decommit, Close and the commits WriteAt makes are serialized (they change the
// array's page table, one driver call after another); ReadAt, WriteAt to committed pages
// and the accessors run alongside each other. Device code must not touch a page while it is
// being decommitted.
type Array struct {
	mu sync.RWMutex

	b      vmm.Backend
	prop   cu.MemAllocationProp
	dev    int
	access []cu.MemAccessDesc
	zero   bool
	page   uint64
	base   cu.DevicePtr
	size   uint64

	pages   map[uint64]cu.MemHandle // committed pages by index
	pending []cleanup
	broken  error
	closed  bool
	st      Stats
}

// New reserves size bytes (rounded up to the page size) of address space.
func New(m *vmm.Manager, size uint64, opts Options) (*Array, error) {
	fail := func(err error) (*Array, error) {
		return nil, &Error{Op: "new", Args: vmm.Size(size), Err: err}
	}
	if m == nil || m.Backend() == nil {
		return fail(fmt.Errorf("%w: nil Manager", ErrInvalid))
	}
	if size == 0 {
		return fail(fmt.Errorf("%w: zero size", ErrInvalid))
	}
	props := vmm.DeviceProps(opts.Device)
	if opts.Props != nil {
		props = *opts.Props
	}
	a := &Array{b: m.Backend(), prop: props.Driver(), dev: opts.Device, zero: opts.Zero, pages: map[uint64]cu.MemHandle{}}
	devs := []int{opts.Device}
	for _, d := range opts.Access {
		if !slices.Contains(devs, d) {
			devs = append(devs, d)
		}
	}
	a.access = vmm.ReadWrite(devs...)
	a.st.Calls++
	g, err := a.b.Granularity(&a.prop, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
	if err != nil {
		return fail(vmm.Call(err, "granularity"))
	}
	if g == 0 || g&(g-1) != 0 {
		return fail(fmt.Errorf("%w: driver granularity %d", ErrInvalid, g))
	}
	page, ok := alignUp(max(opts.PageSize, g), g)
	if !ok {
		return fail(fmt.Errorf("%w: page size %d", ErrInvalid, opts.PageSize))
	}
	// A page is a multiple of the granularity but not always a power of two: round by
	// division.
	total := (size + page - 1) / page * page
	if total < size {
		return fail(fmt.Errorf("%w: size overflows", ErrInvalid))
	}
	a.page, a.size = page, total
	a.st.Calls++
	// Aligned to the page size, so that pages are aligned to their own size (the driver
	// places large pages best on aligned addresses).
	align := uint64(0)
	if page&(page-1) == 0 {
		align = page
	}
	base, err := a.b.Reserve(total, align, 0, 0)
	if err != nil {
		return fail(vmm.Call(err, "reserve %s alignment %d", vmm.Size(total), align))
	}
	a.base = base
	return a, nil
}

// Base is the array's first device address; it never changes.
func (a *Array) Base() cu.DevicePtr {
	if a == nil {
		return 0
	}
	return a.base
}

// Size is the array's size in bytes, a multiple of PageSize.
func (a *Array) Size() uint64 {
	if a == nil {
		return 0
	}
	return a.size
}

// PageSize is the unit of commitment.
func (a *Array) PageSize() uint64 {
	if a == nil {
		return 0
	}
	return a.page
}

// Committed reports whether the page holding offset off has physical memory.
func (a *Array) Committed(off uint64) bool {
	if a == nil || a.page == 0 {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	_, ok := a.pages[off/a.page]
	return ok
}

// Stats returns the occupancy and counters.
func (a *Array) Stats() Stats {
	if a == nil {
		return Stats{}
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	s := a.st
	s.Size, s.PageSize = a.size, a.page
	if a.page != 0 {
		s.Pages = int(a.size / a.page)
	}
	s.Committed = len(a.pages)
	s.CommittedSize = uint64(len(a.pages)) * a.page
	if s.Pages > 0 {
		s.Occupancy = float64(s.Committed) / float64(s.Pages)
	}
	s.Pending = len(a.pending)
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
	for _, run := range runs(a.sortedPages()) {
		out = append(out, Range{Offset: run[0] * a.page, Size: uint64(len(run)) * a.page})
	}
	return out
}

func (a *Array) sortedPages() []uint64 {
	idx := make([]uint64, 0, len(a.pages))
	for i := range a.pages {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	return idx
}

func (a *Array) usable() error {
	if a.closed {
		return ErrClosed
	}
	return a.broken
}

// check validates [off, off+n) against the array and returns its first and last page.
func (a *Array) check(off, n uint64) (first, last uint64, err error) {
	if n == 0 || off >= a.size || n > a.size-off {
		return 0, 0, fmt.Errorf("%w: array of %s", ErrOutOfRange, vmm.Size(a.size))
	}
	return off / a.page, (off + n - 1) / a.page, nil
}

// Commit gives physical memory to every page that [off, off+n) touches and has none. On
// error the array is unchanged.
func (a *Array) Commit(off, n uint64) error {
	args := fmt.Sprintf("%#x+%s", off, vmm.Size(n))
	if a == nil {
		return &Error{Op: "commit", Args: args, Err: fmt.Errorf("%w: nil Array", ErrInvalid)}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.commit(off, n); err != nil {
		return &Error{Op: "commit", Args: args, Err: err}
	}
	return nil
}

func (a *Array) commit(off, n uint64) error {
	if err := a.usable(); err != nil {
		return err
	}
	first, last, err := a.check(off, n)
	if err != nil {
		return err
	}
	a.retryPending()
	var missing []uint64
	for i := first; i <= last; i++ {
		if _, ok := a.pages[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	t := &tx{owner: &a.pending, broken: &a.broken}
	added := map[uint64]cu.MemHandle{}
	for _, run := range runs(missing) {
		for _, i := range run {
			h, err := a.create()
			if err != nil {
				return t.fail(err)
			}
			t.push(cleanup{what: "release new page", do: func() error { return a.release(h) }})
			va := a.addr(i)
			if err := a.mapAt(va, h); err != nil {
				return t.fail(err)
			}
			t.push(cleanup{what: "unmap new page", do: func() error { return a.unmap(va, a.page) }})
			added[i] = h
		}
		// One access call per run of adjacent new pages: the driver takes one call over
		// adjacent mappings.
		va, size := a.addr(run[0]), uint64(len(run))*a.page
		if err := a.setAccess(va, size); err != nil {
			return t.fail(err)
		}
		if a.zero {
			if err := vmm.Call(a.b.MemsetD8(a.dev, va, 0, size), "zero %v+%s from device %d", va, vmm.Size(size), a.dev); err != nil {
				return t.fail(err)
			}
		}
	}
	for i, h := range added {
		a.pages[i] = h
	}
	a.st.Commits += len(added)
	a.st.Peak = max(a.st.Peak, len(a.pages))
	return nil
}

// Decommit releases the physical memory of every committed page lying wholly inside
// [off, off+n); pages the range only partly covers keep theirs. On error the array is
// unchanged.
func (a *Array) Decommit(off, n uint64) error {
	args := fmt.Sprintf("%#x+%s", off, vmm.Size(n))
	if a == nil {
		return &Error{Op: "decommit", Args: args, Err: fmt.Errorf("%w: nil Array", ErrInvalid)}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.decommit(off, n); err != nil {
		return &Error{Op: "decommit", Args: args, Err: err}
	}
	return nil
}

func (a *Array) decommit(off, n uint64) error {
	if err := a.usable(); err != nil {
		return err
	}
	if _, _, err := a.check(off, n); err != nil {
		return err
	}
	a.retryPending()
	first := (off + a.page - 1) / a.page
	end := (off + n) / a.page // exclusive
	var gone []uint64
	for i := first; i < end; i++ {
		if _, ok := a.pages[i]; ok {
			gone = append(gone, i)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	t := &tx{owner: &a.pending, broken: &a.broken}
	for _, run := range runs(gone) {
		va, size := a.addr(run[0]), uint64(len(run))*a.page
		// One unmap per run: the driver unmaps adjacent mappings in one call.
		if err := a.unmap(va, size); err != nil {
			return t.fail(err)
		}
		t.push(cleanup{what: "map decommitted pages back", restore: true, do: func() error {
			for j, i := range run {
				if err := a.mapAt(a.addr(i), a.pages[i]); err != nil {
					for _, k := range run[:j] {
						_ = a.unmap(a.addr(k), a.page)
					}
					return err
				}
			}
			return a.setAccess(va, size)
		}})
	}
	// Commit: the pages are unmapped; releasing their handles cannot be undone, and a
	// failure only leaks until the retry.
	for _, i := range gone {
		h := a.pages[i]
		delete(a.pages, i)
		if err := a.release(h); err != nil {
			a.pending = append(a.pending, cleanup{what: "release decommitted page", do: func() error { return a.release(h) }})
		}
	}
	a.st.Decommits += len(gone)
	return nil
}

// WriteAt writes p at offset off, committing the pages it touches first (from the context
// of Options.Device).
func (a *Array) WriteAt(p []byte, off int64) (int, error) {
	args := fmt.Sprintf("%s at offset %d", vmm.Size(uint64(len(p))), off)
	if a == nil {
		return 0, &Error{Op: "write", Args: args, Err: fmt.Errorf("%w: nil Array", ErrInvalid)}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, &Error{Op: "write", Args: args, Err: ErrOutOfRange}
	}
	// The copies run under the shared lock, alongside other reads and writes; only pages
	// that need committing take the array's exclusive lock, and a Decommit that slips in
	// between sends the write round again.
	for {
		a.mu.RLock()
		if err := a.usable(); err != nil {
			a.mu.RUnlock()
			return 0, &Error{Op: "write", Args: args, Err: err}
		}
		if a.committed(uint64(off), uint64(len(p))) {
			n, err := a.eachPage(uint64(off), p, func(va cu.DevicePtr, q []byte, _ bool) error {
				return vmm.Call(a.b.CopyHtoD(a.dev, va, q), "copy to %v+%s from device %d", va, vmm.Size(uint64(len(q))), a.dev)
			})
			a.mu.RUnlock()
			if err != nil {
				return n, &Error{Op: "write", Args: args, Err: err}
			}
			return n, nil
		}
		a.mu.RUnlock()
		a.mu.Lock()
		err := a.commit(uint64(off), uint64(len(p)))
		a.mu.Unlock()
		if err != nil {
			return 0, &Error{Op: "write", Args: args, Err: err}
		}
	}
}

// committed reports whether every page of [off, off+n) is committed (false when the range
// is out of bounds, which commit then reports).
func (a *Array) committed(off, n uint64) bool {
	first, last, err := a.check(off, n)
	if err != nil {
		return false
	}
	for i := first; i <= last; i++ {
		if _, ok := a.pages[i]; !ok {
			return false
		}
	}
	return true
}

// ReadAt reads len(p) bytes at offset off. Bytes of pages that are not committed read as
// zero, and reading commits nothing.
func (a *Array) ReadAt(p []byte, off int64) (int, error) {
	args := fmt.Sprintf("%s at offset %d", vmm.Size(uint64(len(p))), off)
	if a == nil {
		return 0, &Error{Op: "read", Args: args, Err: fmt.Errorf("%w: nil Array", ErrInvalid)}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, &Error{Op: "read", Args: args, Err: ErrOutOfRange}
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if err := a.usable(); err != nil {
		return 0, &Error{Op: "read", Args: args, Err: err}
	}
	if _, _, err := a.check(uint64(off), uint64(len(p))); err != nil {
		return 0, &Error{Op: "read", Args: args, Err: err}
	}
	n, err := a.eachPage(uint64(off), p, func(va cu.DevicePtr, q []byte, committed bool) error {
		if !committed {
			clear(q)
			return nil
		}
		return vmm.Call(a.b.CopyDtoH(a.dev, q, va), "copy from %v+%s to device %d", va, vmm.Size(uint64(len(q))), a.dev)
	})
	if err != nil {
		return n, &Error{Op: "read", Args: args, Err: err}
	}
	return n, nil
}

// eachPage calls f for the part of p that falls in each page, one page at a time (each
// page is its own allocation, and copies across two are not recorded driver behaviour).
func (a *Array) eachPage(off uint64, p []byte, f func(cu.DevicePtr, []byte, bool) error) (int, error) {
	done := 0
	for done < len(p) {
		pos := off + uint64(done)
		i := pos / a.page
		n := min(uint64(len(p)-done), (i+1)*a.page-pos)
		_, committed := a.pages[i]
		if err := f(a.base+cu.DevicePtr(pos), p[done:done+int(n)], committed); err != nil {
			return done, err
		}
		done += int(n)
	}
	return done, nil
}

// Close decommits every page and frees the reservation. It is idempotent; after a Close
// that failed, a later Close retries what failed.
func (a *Array) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		idx := a.sortedPages()
		for _, run := range runs(idx) {
			va, size := a.addr(run[0]), uint64(len(run))*a.page
			if err := a.unmap(va, size); err != nil {
				a.pending = append(a.pending, cleanup{what: "unmap", do: func() error { return a.unmap(va, size) }})
			}
		}
		for _, i := range idx {
			h := a.pages[i]
			if err := a.release(h); err != nil {
				a.pending = append(a.pending, cleanup{what: "release", do: func() error { return a.release(h) }})
			}
		}
		a.pages = map[uint64]cu.MemHandle{}
		base, size := a.base, a.size
		a.st.Calls++
		if err := a.b.Free(base, size); err != nil {
			a.pending = append(a.pending, cleanup{what: "free", do: func() error {
				return vmm.Call(a.b.Free(base, size), "free %v+%s", base, vmm.Size(size))
			}})
		}
	}
	if err := a.retryPending(); err != nil {
		return &Error{Op: "close", Err: err}
	}
	return nil
}

func (a *Array) retryPending() error {
	var errs []error
	var left []cleanup
	for _, c := range a.pending {
		if err := c.do(); err != nil {
			left = append(left, c)
			errs = append(errs, fmt.Errorf("%s: %w", c.what, err))
		}
	}
	a.pending = left
	return errors.Join(errs...)
}

func (a *Array) addr(page uint64) cu.DevicePtr { return a.base + cu.DevicePtr(page*a.page) }

func (a *Array) create() (cu.MemHandle, error) {
	a.st.Calls++
	prop := a.prop
	h, err := a.b.Create(a.page, &prop, 0)
	return h, vmm.Call(err, "create %s", vmm.Size(a.page))
}

func (a *Array) release(h cu.MemHandle) error {
	a.st.Calls++
	return vmm.Call(a.b.Release(h), "release %v", h)
}

func (a *Array) mapAt(va cu.DevicePtr, h cu.MemHandle) error {
	a.st.Calls++
	return vmm.Call(a.b.Map(va, a.page, 0, h, 0), "map %v+%s %v", va, vmm.Size(a.page), h)
}

func (a *Array) unmap(va cu.DevicePtr, size uint64) error {
	a.st.Calls++
	return vmm.Call(a.b.Unmap(va, size), "unmap %v+%s", va, vmm.Size(size))
}

func (a *Array) setAccess(va cu.DevicePtr, size uint64) error {
	a.st.Calls++
	return vmm.Call(a.b.SetAccess(va, size, a.access), "set access %v+%s", va, vmm.Size(size))
}

// tx collects the undo steps of one operation (see buffer's).
type tx struct {
	owner  *[]cleanup
	broken *error
	undo   []cleanup
}

func (t *tx) push(c cleanup) { t.undo = append(t.undo, c) }

func (t *tx) fail(err error) error {
	for i := len(t.undo) - 1; i >= 0; i-- {
		c := t.undo[i]
		if uerr := c.do(); uerr != nil {
			if c.restore {
				*t.broken = fmt.Errorf("%w: %s: %v (after %v)", ErrBroken, c.what, uerr, err)
				err = errors.Join(err, *t.broken)
				continue
			}
			*t.owner = append(*t.owner, c)
		}
	}
	t.undo = nil
	return err
}

// runs splits sorted page indexes into runs of adjacent ones.
func runs(idx []uint64) [][]uint64 {
	var out [][]uint64
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j] == idx[j-1]+1 {
			j++
		}
		out = append(out, idx[i:j])
		i = j
	}
	return out
}

func alignUp(n, g uint64) (uint64, bool) {
	r := (n + g - 1) &^ (g - 1)
	return r, r >= n
}
