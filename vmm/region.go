package vmm

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/treap"
	"github.com/cuvmm/cuvmm/internal/units"
)

// Region is a reservation and the allocations mapped whole in it, in address order: the
// layout the building blocks stand on (a buffer's reservations, a sparse array's pages, a
// sleep tag's memory, striped peer memory, an import). Tx.Add maps a run of allocations with one
// access call and Tx.Remove unmaps a range in one call, each undone by the transaction;
// Close unmaps everything, frees the range and releases the allocations the region holds,
// which are the region's from Add until Remove gives them back.
//
// A chunk can sleep (Swap, which package sleep uses): its device memory gone, its place
// kept, and host memory or nothing mapped there. While one does, the region refuses Add
// and Remove, and ReadAt and WriteAt over a chunk with nothing mapped, with ErrAsleep.
//
// Its methods are safe for concurrent use. Copies pin the reservation, not the chunk list:
// they run alongside each other and alongside Add and Remove, and a copy that touches a
// range being unmapped fails in the driver. Reads and writes after Close fail with
// ErrClosed. Only a Manager or a Tx makes one: a nil or zero Region fails every call with
// ErrInvalid.
type Region struct {
	r   *Reservation
	dev int

	// change is held across each change of what is mapped (Add, Remove, Swap, SetAccess,
	// Close), driver calls included, so that a sleep's swap and its owner's change of one
	// region never interleave; mu guards the fields below and is never held across a call.
	change sync.Mutex
	mu     sync.Mutex
	chunks treap.Tree[Chunk] // by offset, none overlapping
	used   uint64            // the chunks' bytes
	asleep int               // chunks asleep
}

// Chunk is one allocation mapped whole at offset Off of a Region, with the access it was
// given there.
type Chunk struct {
	Off, Size uint64
	// Alloc is the memory mapped there: nil while the chunk sleeps with nothing mapped.
	Alloc  *Allocation
	Access []cu.MemAccessDesc
	// Asleep: the chunk's device memory is gone (Swap); Alloc, if any, is host memory
	// parked in its place.
	Asleep bool
}

// End is the offset just past the chunk.
func (c Chunk) End() uint64 { return c.Off + c.Size }

// copied is c with its own copy of Access: what g records is never the caller's to edit.
func (c Chunk) copied() Chunk {
	c.Access = slices.Clone(c.Access)
	return c
}

var errNoRegion = invalid("a nil or zero Region (make one with Manager.NewRegion)")

// NewRegion reserves size bytes (a multiple of the granularity) of address space for a
// region whose copies run in device dev's context.
func (m *Manager) NewRegion(size uint64, dev int, opts ...ReserveOption) (*Region, error) {
	r, err := m.Reserve(size, opts...)
	if err != nil {
		return nil, err
	}
	return &Region{r: r, dev: dev}, nil
}

// NewRegion is Manager.NewRegion; undone by closing the region.
func (t *Tx) NewRegion(size uint64, dev int, opts ...ReserveOption) (*Region, error) {
	if t == nil {
		return nil, opErr(errNoTx, "reserve", "%s", units.Size(size))
	}
	g, err := t.m.NewRegion(size, dev, opts...)
	return made(t, "free", g, err)
}

// Manager is the Manager g was made with (nil for a nil or zero Region).
func (g *Region) Manager() *Manager {
	if r := g.res(); r != nil {
		return r.m
	}
	return nil
}

// res is g's reservation: nil for a nil Region, whose methods then answer as a nil
// Reservation's do.
func (g *Region) res() *Reservation {
	if g == nil {
		return nil
	}
	return g.r
}

func (g *Region) usable() bool { return g.res().usable() }

// Base is the region's first address (0 for a nil Region).
func (g *Region) Base() cu.DevicePtr { return g.res().Base() }

// Size is the region's size in bytes (0 for a nil Region).
func (g *Region) Size() uint64 { return g.res().Size() }

// Device is the device whose context ReadAt and WriteAt copy from.
func (g *Region) Device() int {
	if g == nil {
		return 0
	}
	return g.dev
}

// Regions returns g alone: a Region is memory package sleep can tag (sleep.Memory).
func (g *Region) Regions() []*Region { return []*Region{g} }

// Chunks lists the chunks that lie wholly or partly in the size bytes at offset off, in
// address order; Chunks(0, Size()) lists them all.
func (g *Region) Chunks(off, size uint64) []Chunk {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Chunk
	g.each(off, size, func(n *treap.Node[Chunk]) { out = append(out, n.Val.copied()) })
	return out
}

// Asleep reports whether a chunk of g sleeps: then g refuses Add and Remove (vmm.ErrAsleep),
// and its owner should refuse what would change it (a buffer's Grow into a new region).
func (g *Region) Asleep() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asleep > 0
}

// Used is the number of bytes the region's chunks cover, asleep or not.
func (g *Region) Used() uint64 {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}

// sleeping says why the region may not change while a chunk of it sleeps, or nil.
func (g *Region) sleeping() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.asleep == 0 {
		return nil
	}
	var at uint64
	g.each(0, g.Size(), func(n *treap.Node[Chunk]) {
		if n.Val.Asleep && at == 0 {
			at = n.Key + 1
		}
	})
	return fmt.Errorf("%w: the chunk at +%s sleeps", ErrAsleep, units.Size(at-1))
}

// each calls f with the chunks that overlap [off, off+size), in address order; the caller
// holds g.mu, and f does not change the tree.
func (g *Region) each(off, size uint64, f func(*treap.Node[Chunk])) {
	end := endOf(off, size)
	n := g.chunks.Floor(off)
	if n == nil || n.Key+n.Span <= off {
		n = g.chunks.Ceil(off)
	}
	for ; n != nil && n.Key < end; n = g.chunks.Ceil(n.Key + 1) {
		f(n)
	}
}

// endOf is the end of the size bytes at off, or the end of the address space.
func endOf(off, size uint64) uint64 {
	if off+size < off {
		return math.MaxUint64
	}
	return off + size
}

// insert records c; the caller holds g.mu.
func (g *Region) insert(c Chunk) {
	g.chunks.Insert(c.Off, c.Size, c)
	g.used += c.Size
	if c.Asleep {
		g.asleep++
	}
}

// ReadAt reads len(p) bytes at offset off of the region into p, from the context of the
// region's device, in one driver call: the driver copies across the allocations of one
// device in one call (recorded: vmmtest data/copy-across-allocations). A range that
// touches a chunk sleeping with nothing mapped fails with ErrAsleep.
func (g *Region) ReadAt(p []byte, off int64) (int, error) { return g.copyAt(View.ReadAt, p, off) }

// WriteAt writes p at offset off of the region, as ReadAt.
func (g *Region) WriteAt(p []byte, off int64) (int, error) { return g.copyAt(View.WriteAt, p, off) }

func (g *Region) copyAt(cp func(View, []byte, int64) (int, error), p []byte, off int64) (int, error) {
	if g != nil && off >= 0 {
		g.mu.Lock()
		gone, asleep := uint64(0), false // a chunk of the range asleep with nothing mapped
		if g.asleep > 0 {
			g.each(uint64(off), uint64(len(p)), func(n *treap.Node[Chunk]) {
				if n.Val.Alloc == nil && !asleep {
					gone, asleep = n.Val.Off, true
				}
			})
		}
		g.mu.Unlock()
		if asleep {
			return 0, opErr(fmt.Errorf("%w (the chunk at +%s)", ErrAsleep, units.Size(gone)), "copy",
				"%s at offset %d", units.Size(uint64(len(p))), off)
		}
	}
	return cp(g.From(g.Device()), p, off)
}

// From returns the region as device dev reaches it.
func (g *Region) From(dev int) View { return g.res().From(dev) }

// Add maps allocs whole, one after another from offset off of g, gives the run access in
// one driver call (none when access is empty) and records them as g's chunks. It is undone
// by unmapping them, which gives them back to the transaction's caller: an allocation the
// transaction created is then released by the Create's own undo.
func (t *Tx) Add(g *Region, off uint64, access []cu.MemAccessDesc, allocs ...*Allocation) error {
	var size uint64
	for _, a := range allocs {
		size += a.Size()
	}
	switch {
	case t == nil:
		return rangeErr(errNoTx, "map", g.Base()+cu.DevicePtr(off), size)
	case !g.usable():
		return rangeErr(errNoRegion, "map", g.Base()+cu.DevicePtr(off), size)
	}
	g.change.Lock()
	defer g.change.Unlock()
	if err := g.sleeping(); err != nil {
		return rangeErr(err, "map", g.Base()+cu.DevicePtr(off), size)
	}
	start := off
	if _, err := t.MapAll(g.r, off, access, allocs...); err != nil {
		return err
	}
	access = slices.Clone(access)
	g.mu.Lock()
	for _, a := range allocs {
		g.insert(Chunk{Off: off, Size: a.Size(), Alloc: a, Access: access})
		off += a.Size()
	}
	g.mu.Unlock()
	t.OnRollback("forget", func() error {
		g.change.Lock()
		defer g.change.Unlock()
		g.forget(start, off-start)
		return nil
	})
	return nil
}

// SetAccess sets the access of each descriptor's location to the chunks in the size bytes
// at offset off, in one driver call (the range starts and ends with whole chunks), and
// records it as theirs.
func (g *Region) SetAccess(off, size uint64, access ...cu.MemAccessDesc) error {
	if !g.usable() {
		return rangeErr(errNoRegion, "set access", g.Base()+cu.DevicePtr(off), size)
	}
	g.change.Lock()
	defer g.change.Unlock()
	if err := g.r.SetAccess(off, size, access...); err != nil {
		return err
	}
	access = slices.Clone(access)
	g.mu.Lock()
	g.each(off, size, func(n *treap.Node[Chunk]) { n.Val.Access = access })
	g.mu.Unlock()
	return nil
}

// forget drops the chunks in [off, off+size) from g's list and returns them.
func (g *Region) forget(off, size uint64) []Chunk {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []Chunk
	g.each(off, size, func(n *treap.Node[Chunk]) { gone = append(gone, n.Val) })
	for _, c := range gone {
		g.chunks.Delete(c.Off)
		g.used -= c.Size
		if c.Asleep {
			g.asleep--
		}
	}
	return gone
}

// Remove unmaps the size bytes at offset off of g in one driver call and returns the
// chunks that were there, which are the caller's from then on (to release, or to add
// again elsewhere). The range must not split a chunk. It is undone by mapping the chunks
// back with their access, a Restore: if that fails the transaction reports ErrBroken.
func (t *Tx) Remove(g *Region, off, size uint64) ([]Chunk, error) {
	switch {
	case t == nil:
		return nil, rangeErr(errNoTx, "unmap", g.Base()+cu.DevicePtr(off), size)
	case !g.usable():
		return nil, rangeErr(errNoRegion, "unmap", g.Base()+cu.DevicePtr(off), size)
	}
	g.change.Lock()
	defer g.change.Unlock()
	err := g.sleeping()
	g.mu.Lock()
	g.each(off, size, func(n *treap.Node[Chunk]) {
		if err == nil && (n.Key < off || n.Val.End() > endOf(off, size)) {
			err = invalid("the range splits a chunk")
		}
	})
	g.mu.Unlock()
	if err != nil {
		return nil, rangeErr(err, "unmap", g.Base()+cu.DevicePtr(off), size)
	}
	if err := g.r.Unmap(off, size); err != nil {
		return nil, err
	}
	gone := g.forget(off, size)
	t.Restore("map the removed chunks back", func() error { return g.putBack(gone) })
	out := make([]Chunk, len(gone))
	for i, c := range gone {
		out[i] = c.copied()
	}
	return out, nil
}

// putBack maps chunks, removed from g, where they were, with their access, and records
// them again. On failure it unmaps what it mapped and records them unmapped all the same:
// they are g's, for its Close to release.
func (g *Region) putBack(chunks []Chunk) error {
	tx := g.r.m.Begin(nil)
	for i := 0; i < len(chunks); {
		j := i + 1
		for j < len(chunks) && chunks[j].Off == chunks[j-1].End() && slices.Equal(chunks[j].Access, chunks[i].Access) {
			j++
		}
		allocs := make([]*Allocation, j-i)
		for k := range allocs {
			allocs[k] = chunks[i+k].Alloc
		}
		if err := tx.Add(g, chunks[i].Off, chunks[i].Access, allocs...); err != nil {
			err = tx.Rollback(err) // which forgets the runs put back before this one too
			g.mu.Lock()
			for _, c := range chunks {
				g.insert(c)
			}
			g.mu.Unlock()
			return err
		}
		i = j
	}
	tx.Commit()
	return nil
}

// Close unmaps every chunk (in one driver call), frees the range and releases the chunks'
// allocations, once the copies in flight have finished. It is idempotent; after a Close
// that failed (the driver refusing a release), a later Close retries what failed.
func (g *Region) Close() error {
	if !g.usable() {
		return rangeErr(errNoRegion, "free", g.Base(), g.Size())
	}
	g.change.Lock()
	defer g.change.Unlock()
	if err := g.r.Close(); err != nil {
		return err
	}
	var errs []error
	for _, c := range g.Chunks(0, g.Size()) {
		if c.Alloc != nil {
			if err := c.Alloc.Close(); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		g.forget(c.Off, c.Size)
	}
	return errors.Join(errs...)
}

// Swap puts a in the place of the chunk at offset off: it unmaps what is mapped there, maps
// a whole (nil: nothing, for a chunk marked asleep only) with the chunk's access, and marks
// the chunk asleep or awake (a that is there already is only marked). It returns what was
// mapped there before, which is the caller's from then on. The region holds a until the
// next Swap gives it back, and releases it on Close. A closed a, or nil for an awake chunk,
// is refused before anything is unmapped. On failure the chunk holds what is mapped there:
// the old allocation when the unmap failed (and nothing is returned), nothing when the map
// failed (and the old allocation is returned).
func (g *Region) Swap(off uint64, a *Allocation, asleep bool) (*Allocation, error) {
	if !g.usable() {
		return nil, rangeErr(errNoRegion, "swap", g.Base()+cu.DevicePtr(off), a.Size())
	}
	// set records what is mapped at chunk n; the caller holds g.mu.
	set := func(n *treap.Node[Chunk], a *Allocation) {
		switch {
		case asleep && !n.Val.Asleep:
			g.asleep++
		case !asleep && n.Val.Asleep:
			g.asleep--
		}
		n.Val.Alloc, n.Val.Asleep = a, asleep
	}
	// Marking what is there changes nothing mapped: no change lock, so that a wake's
	// copies do not wait behind the next chunk's map.
	g.mu.Lock()
	if n := g.chunks.Get(off); n != nil && a != nil && a == n.Val.Alloc {
		set(n, a)
		g.mu.Unlock()
		return nil, nil
	}
	g.mu.Unlock()
	g.change.Lock()
	defer g.change.Unlock()
	g.mu.Lock()
	n := g.chunks.Get(off)
	if n == nil || (a != nil && a.Size() != n.Span) {
		g.mu.Unlock()
		return nil, rangeErr(invalid("no chunk of that size starts there"), "swap", g.Base()+cu.DevicePtr(off), a.Size())
	}
	c := n.Val
	g.mu.Unlock()
	// What makes the map fail for sure is refused before anything is unmapped.
	switch {
	case a == nil && !asleep:
		return nil, rangeErr(invalid("only a sleeping chunk has nothing mapped"), "swap", g.Base()+cu.DevicePtr(off), n.Span)
	case a == nil:
	case g.r.m.foreign(a.m):
		return nil, rangeErr(errForeign, "swap", g.Base()+cu.DevicePtr(off), a.Size())
	default:
		if err := a.enter(); err != nil { // held to the map: a Close of a waits until then
			return nil, rangeErr(err, "swap", g.Base()+cu.DevicePtr(off), a.Size())
		}
		defer a.l.exit()
	}
	// The node stays while the change lock is held: no Add, Remove or Close runs.
	record := func(a *Allocation) {
		g.mu.Lock()
		set(n, a)
		g.mu.Unlock()
	}
	if c.Alloc != nil {
		if err := g.r.Unmap(off, c.Size); err != nil {
			return nil, err
		}
		record(nil)
	}
	if a == nil {
		return c.Alloc, nil
	}
	mp, err := g.r.mapPinned(off, a)
	if err == nil && len(c.Access) > 0 {
		if err = mp.SetAccess(c.Access...); err != nil {
			if uerr := mp.Close(); uerr != nil {
				record(a) // mapped all the same: Close unmaps and releases it
				return c.Alloc, errors.Join(err, uerr)
			}
		}
	}
	if err != nil {
		return c.Alloc, err
	}
	record(a)
	return c.Alloc, nil
}
