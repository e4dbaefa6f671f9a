package kv

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// Geometry is the shape of a cache: its planes (a model's layers times K and V), the
// bytes one token takes in one plane, and its request slots.
type Geometry struct {
	Planes        int    // layers x 2 (K and V)
	BytesPerToken uint64 // in one plane
	Slots         int    // requests served at once
	MaxTokens     int    // the most tokens of one request
	// PageSize is the physical page (a multiple of the device's granularity; its minimum
	// granularity when 0).
	PageSize uint64
	Device   int
}

// Options tune a cache.
type Options struct {
	// Ahead is how many pages past its tokens the committer keeps mapped for each active
	// slot, and for each free slot (ready for the next request's prompt). 0 runs no
	// committer: every page is committed by Ensure, on the step path.
	Ahead int
	// Limit caps the device memory the cache holds (0: none). Trim gives back pages no
	// slot uses; the committer never commits past the limit; Ensure past it fails with
	// vmm.ErrTooLarge after trimming.
	Limit uint64
}

// Stats are what a cache did.
type Stats struct {
	Pages         int    // page indices committed now, over all slots (each in every plane)
	Bytes         uint64 // device memory held
	Commits       int    // page indices committed in all, by the committer and on the step path
	StepCommits   int    // page indices Ensure had to commit itself
	StepCalls     int    // driver calls Ensure made (create, map, set-access and release)
	StepWaits     int    // Ensure calls that waited on the committer or committed
	StepWaitTotal time.Duration
	StepWaitMax   time.Duration
	Trimmed       int // page indices given back
}

// Cache is a KV cache of per-request virtual tensors; see the package documentation.
type Cache struct {
	m      *vmm.Manager
	g      Geometry
	ahead  int
	limit  uint64
	page   uint64
	slotSz uint64 // bytes of one slot in one plane
	planes []*vmm.Reservation
	access []cu.MemAccessDesc

	mu     sync.Mutex
	cond   *sync.Cond
	slots  []slot
	stats  Stats
	closed atomic.Bool // set under mu
	wake   chan struct{}
	// want is set by Ensure's fast path when a slot comes within Ahead of its mapped
	// pages. The committer polls it rather than being woken: waking a parked goroutine
	// costs the waker microseconds, and a slot consumes its pages ahead over many steps.
	want atomic.Bool
	done chan struct{}
	// pending are the releases the driver refused, retried at Close.
	pending vmm.Pending
	// behind is why the committer's last commit failed (nil after one that worked).
	behind error
}

// slot is one request's place. Ensure's fast path reads it without the lock: it stores
// used and active (only when they change, so that a step that stays within its pages
// writes nothing the committer reads), then loads trimming, floor and mapped; a trim sets
// trimming, then loads used and active and publishes its floor, and never unmaps a page
// below it. Go's atomics are sequentially consistent, so either the trim sees the new
// pages, or Ensure sees the trim and goes on only if the pages it needs are below the
// floor, else takes the lock. A commit under way only adds pages: it does not stop the
// fast path. busy, trimming, floor and mapped are written under c.mu.
type slot struct {
	used     atomic.Int64 // pages its tokens touch
	active   atomic.Bool  // a request holds the slot
	mapped   atomic.Int64 // pages 0..mapped-1 are committed in every plane
	busy     atomic.Bool  // pages are being committed or trimmed, outside the lock
	trimming atomic.Bool  // pages are being trimmed (busy too)
	floor    atomic.Int64 // while trimming: the pages below it stay (-1: not known yet)
	// leftover: past mapped, some plane may still map pages that a trim or a rollback the
	// driver refused in part left there; the next commit unmaps them first. Written under
	// c.mu or while busy.
	leftover bool
}

var errNoCache = fmt.Errorf("%w: a nil or zero Cache (make one with New)", vmm.ErrInvalid)

// usable reports whether c was made by New.
func (c *Cache) usable() bool { return c != nil && c.cond != nil }

func fail(op, args string, err error) error {
	if err == nil {
		return nil
	}
	return &vmm.Error{Pkg: "kv", Op: op, Args: args, Err: err}
}

// New reserves the planes (no device memory) and starts the committer when opts.Ahead > 0.
func New(m *vmm.Manager, g Geometry, opts Options) (*Cache, error) {
	args := fmt.Sprintf("%d planes x %d slots x %d tokens x %s", g.Planes, g.Slots, g.MaxTokens, units.Size(g.BytesPerToken))
	if g.Planes <= 0 || g.Slots <= 0 || g.MaxTokens <= 0 || g.BytesPerToken == 0 || opts.Ahead < 0 {
		return nil, fail("new", args, vmm.ErrInvalid)
	}
	gran, err := m.Granularity(vmm.DeviceProps(g.Device), false)
	if err != nil {
		return nil, fail("new", args, err)
	}
	page := g.PageSize
	if page == 0 {
		page = gran
	}
	if page%gran != 0 {
		return nil, fail("new", args, fmt.Errorf("%w: page %s is not a multiple of the granularity %s", vmm.ErrInvalid, units.Size(page), units.Size(gran)))
	}
	// A slot's tensor, whole pages, and a plane of every slot's: none may wrap.
	hi, bytes := bits.Mul64(uint64(g.MaxTokens), g.BytesPerToken)
	pages := bytes/page + min(bytes%page, 1)
	hi2, slotSz := bits.Mul64(pages, page)
	hi3, plane := bits.Mul64(slotSz, uint64(g.Slots))
	if hi|hi2|hi3 != 0 {
		return nil, fail("new", args, vmm.ErrTooLarge)
	}
	c := &Cache{m: m, g: g, ahead: opts.Ahead, limit: opts.Limit, page: page, slotSz: slotSz,
		access: vmm.ReadWrite(g.Device), wake: make(chan struct{}, 1), done: make(chan struct{})}
	for range g.Planes {
		r, err := m.Reserve(plane)
		if err != nil {
			for _, r := range c.planes {
				if e := r.Close(); e != nil {
					err = errors.Join(err, e)
					m.Pending().Add("free of a KV cache plane", r.Close) // no Cache is returned to retry it on
				}
			}
			return nil, fail("new", args, err)
		}
		c.planes = append(c.planes, r)
	}
	// Once the planes are reserved: the driver, not the Go heap, refuses a count of slots
	// no address space holds.
	c.slots = make([]slot, g.Slots)
	c.cond = sync.NewCond(&c.mu)
	if c.ahead > 0 {
		go c.committer()
	} else {
		close(c.done)
	}
	return c, nil
}

// Plane is the first address of plane i: slot s's tensor in it starts at
// Plane(i) + s*SlotBytes(). It is 0 for an i out of range.
func (c *Cache) Plane(i int) cu.DevicePtr {
	if !c.usable() || i < 0 || i >= len(c.planes) {
		return 0
	}
	return c.planes[i].Base()
}

// SlotBytes is the size of one slot's tensor in one plane.
func (c *Cache) SlotBytes() uint64 {
	if c == nil {
		return 0
	}
	return c.slotSz
}

// PageSize is the size of a page.
func (c *Cache) PageSize() uint64 {
	if c == nil {
		return 0
	}
	return c.page
}

// Ensure makes every page that the first tokens tokens of slot touch resident in every
// plane, and marks the slot active. In steady state with a committer the pages are already
// there and Ensure makes no driver call; otherwise it waits for the committer, or commits
// them itself (Stats counts both).
func (c *Cache) Ensure(slot, tokens int) error {
	if !c.usable() {
		return fail("ensure", ensureArgs(slot, tokens), errNoCache)
	}
	if slot < 0 || slot >= c.g.Slots || tokens < 0 || tokens > c.g.MaxTokens {
		return fail("ensure", ensureArgs(slot, tokens), vmm.ErrOutOfRange)
	}
	need := int64((uint64(tokens)*c.g.BytesPerToken + c.page - 1) / c.page) // pages the tokens touch
	s := &c.slots[slot]
	if s.used.Load() != need {
		s.used.Store(need)
	}
	if !s.active.Load() {
		s.active.Store(true)
	}
	if c.closed.Load() {
		return fail("ensure", ensureArgs(slot, tokens), vmm.ErrClosed)
	}
	if !s.trimming.Load() || s.floor.Load() >= need {
		if m := s.mapped.Load(); m >= need {
			if m < min(need+int64(c.ahead), int64(c.slotSz/c.page)) && !c.want.Load() {
				c.want.Store(true) // the committer tops the slot up at its next poll
			}
			return nil
		}
	}
	args := ensureArgs(slot, tokens)
	// The slow path: pages missing, or a trim of the slot under way (one that read the
	// tokens before this Ensure stored them may be unmapping pages it needs).
	c.mu.Lock()
	defer c.mu.Unlock()
	var t0 time.Time
	for s.trimming.Load() || s.mapped.Load() < need {
		if t0.IsZero() {
			t0 = time.Now()
			defer func() {
				d := time.Since(t0)
				c.stats.StepWaits++
				c.stats.StepWaitTotal += d
				c.stats.StepWaitMax = max(c.stats.StepWaitMax, d)
				c.kick()
			}()
		}
		if c.closed.Load() {
			return fail("ensure", args, vmm.ErrClosed)
		}
		if s.busy.Load() {
			c.cond.Wait()
			continue
		}
		n := int(need - s.mapped.Load())
		dropped, err := c.reserveRoom(n, slot)
		if err != nil {
			return fail("ensure", args, err)
		}
		if dropped {
			continue // the slots changed meanwhile: look again
		}
		if err := c.commitLocked(slot, n, true); err != nil {
			return fail("ensure", args, err)
		}
	}
	return nil
}

// ensureArgs describes an Ensure call in its errors (made only for an error or the slow
// path: the fast path formats nothing).
func ensureArgs(slot, tokens int) string { return fmt.Sprintf("slot %d, %d tokens", slot, tokens) }

// Release ends slot's request. Its pages stay mapped for the next request of the slot
// (deferred reclamation: no unmap and map between requests); Trim gives them back.
func (c *Cache) Release(slot int) error {
	if !c.usable() {
		return fail("release", fmt.Sprintf("slot %d", slot), errNoCache)
	}
	if slot < 0 || slot >= len(c.slots) {
		return fail("release", fmt.Sprintf("slot %d", slot), vmm.ErrOutOfRange)
	}
	c.slots[slot].active.Store(false)
	c.slots[slot].used.Store(0)
	c.kick() // the committer trims the slot to what it keeps ahead
	return nil
}

// inUse is the pages slot s's tokens touch (none when it is free).
func (c *Cache) inUse(s *slot) int {
	if !s.active.Load() {
		return 0
	}
	return int(s.used.Load())
}

// bytesPerIndex is the device memory of one page index: the page in every plane.
func (c *Cache) bytesPerIndex() uint64 { return c.page * uint64(c.g.Planes) }

// reserveRoom makes room under the limit for n page indices of slot, trimming what no
// slot uses; the caller holds c.mu.
// It reports whether it trimmed, which drops c.mu: the caller must then look at the slots
// again before it commits.
func (c *Cache) reserveRoom(n, slot int) (dropped bool, err error) {
	if c.limit == 0 || c.stats.Bytes+uint64(n)*c.bytesPerIndex() <= c.limit {
		return false, nil
	}
	_ = c.trimLocked(slot)
	if c.stats.Bytes+uint64(n)*c.bytesPerIndex() > c.limit {
		return true, fmt.Errorf("%w: %d more pages in %d planes would pass the limit of %s (%s held)", vmm.ErrTooLarge, n, c.g.Planes, units.Size(c.limit), units.Size(c.stats.Bytes))
	}
	return true, nil
}

// commitLocked commits pages mapped..mapped+n-1 of slot in every plane, as one
// transaction: for each plane the allocations are created, mapped one after another, get
// their access in one call and lose their own references; on any failure nothing of the
// n page indices stays.
// The caller holds c.mu, which is released around the driver calls (the slot is busy).
func (c *Cache) commitLocked(slot, n int, step bool) error {
	s := &c.slots[slot]
	first := int(s.mapped.Load())
	if s.busy.Load() || n <= 0 || uint64(first+n)*c.page > c.slotSz {
		return fmt.Errorf("kv: internal: commit of %d pages from %d of slot %d (busy %v)", n, first, slot, s.busy.Load())
	}
	s.busy.Store(true)
	c.mu.Unlock()
	_ = c.pending.Retry()
	tx := c.m.Begin(&c.pending)
	err := func() error {
		off := uint64(slot)*c.slotSz + uint64(first)*c.page
		if s.leftover {
			for _, r := range c.planes {
				if err := r.Unmap(off, c.slotSz-uint64(first)*c.page); err != nil {
					return err
				}
			}
			s.leftover = false
		}
		allocs := make([]*vmm.Allocation, n)
		for _, r := range c.planes {
			for i := range allocs {
				a, err := tx.Create(c.page, vmm.DeviceProps(c.g.Device))
				if err != nil {
					return err
				}
				allocs[i] = a
			}
			if _, err := tx.MapAll(r, off, c.access, allocs...); err != nil {
				return err
			}
			// The mappings hold the memory: the allocations' own references go now, so
			// that an unmap (a rollback's included) frees it; a rollback's release of them
			// again does nothing. A release the driver refuses is retried at Close.
			for _, a := range allocs {
				if err := a.Close(); err != nil {
					c.pending.Add("release of a page's reference", a.Close)
				}
			}
		}
		return nil
	}()
	if err != nil {
		err = tx.Rollback(err)
	} else {
		tx.Commit()
	}
	c.mu.Lock()
	if err == nil {
		s.mapped.Add(int64(n))
	} else {
		// The rollback's refused unmaps are in c.pending, whose retry may be refused again:
		// the next commit also unmaps the tail itself.
		s.leftover = true
	}
	s.busy.Store(false)
	c.cond.Broadcast()
	if err != nil {
		return err
	}
	c.stats.Pages += n
	c.stats.Commits += n
	c.stats.Bytes += uint64(n) * c.bytesPerIndex()
	if step {
		c.stats.StepCommits += n
		c.stats.StepCalls += c.g.Planes * (3*n + 1)
	}
	return nil
}

// kick wakes the committer.
func (c *Cache) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// poll is how often the committer looks at want.
const poll = 5 * time.Millisecond

// committer keeps Ahead pages mapped past the tokens of each active slot, and Ahead pages
// in each free slot, under the limit, one page index at a time.
func (c *Cache) committer() {
	defer close(c.done)
	// Woken by Release, Ready and Ensure's slow path; each poll looks at want, and retries
	// what the last pass left undone (a failed commit, the limit).
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		c.want.Store(false)
		c.mu.Lock()
		undone := false
		for !c.closed.Load() {
			slot, n := c.nextWork()
			undone = n != 0
			if n == 0 {
				c.behind = nil // nothing is behind any more, whoever caught up
				c.trimFreeLocked()
				break
			}
			dropped, err := c.reserveRoom(1, slot)
			if err != nil {
				break
			}
			if dropped {
				continue
			}
			c.behind = c.commitLocked(slot, 1, false)
			if c.behind != nil {
				break // Ensure commits what it needs itself; the next poll tries again
			}
		}
		closed := c.closed.Load()
		c.cond.Broadcast() // for Ready
		c.mu.Unlock()
		if closed {
			return
		}
		for waiting := true; waiting; {
			select {
			case <-c.wake:
				waiting = false
			case <-tick.C:
				waiting = !undone && !c.want.Load()
			}
		}
	}
}

// nextWork is the slot most short of its target and how many pages it lacks (none when
// the limit leaves no room); the caller holds c.mu.
func (c *Cache) nextWork() (slot, n int) {
	if c.limit != 0 && c.stats.Bytes+c.bytesPerIndex() > c.limit {
		return -1, 0
	}
	best, lack := -1, 0
	for i := range c.slots {
		s := &c.slots[i]
		if s.busy.Load() {
			continue
		}
		target := min(c.inUse(s)+c.ahead, int(c.slotSz/c.page))
		if d := target - int(s.mapped.Load()); d > lack {
			best, lack = i, d
		}
	}
	return best, lack
}

// trimFreeLocked gives back what a free slot holds past the pages kept ahead, so that the
// memory held stays within the pages in use and the watermark; the caller holds c.mu.
func (c *Cache) trimFreeLocked() {
	for i := range c.slots {
		if s := &c.slots[i]; !s.active.Load() && !s.busy.Load() && s.mapped.Load() > int64(c.ahead) {
			_ = c.trimSlotLocked(i, c.ahead) // what fails is tried again at the next pass
		}
	}
}

// Ready waits until the committer has mapped every page it keeps ahead (within the
// limit), as a server does before its first step, or returns why its last commit failed;
// without a committer it returns at once.
func (c *Cache) Ready() error {
	if !c.usable() {
		return fail("ready", "", errNoCache)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.ahead > 0 && !c.closed.Load() {
		if c.behind != nil {
			return fail("ready", "", c.behind)
		}
		if _, n := c.nextWork(); n == 0 && !c.anyBusy() {
			return nil
		}
		c.kick()
		c.cond.Wait()
	}
	if c.closed.Load() {
		return fail("ready", "", vmm.ErrClosed)
	}
	return nil
}

func (c *Cache) anyBusy() bool {
	for i := range c.slots {
		if c.slots[i].busy.Load() {
			return true
		}
	}
	return false
}

// Trim gives back the pages no slot uses: past each active slot's tokens (and the pages
// the committer keeps ahead), and all of a free slot's. The committer then maps the pages
// it keeps ahead again (Options.Limit is what caps the memory held).
func (c *Cache) Trim() error {
	if !c.usable() {
		return fail("trim", "", errNoCache)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return fail("trim", "", vmm.ErrClosed)
	}
	defer c.kick() // the committer maps the pages it keeps ahead again
	return fail("trim", "", c.trimLocked(-1))
}

// trimLocked unmaps the pages of every slot but keep that no slot uses; the caller holds
// c.mu, which is released around each slot's driver calls (the slot is busy meanwhile).
func (c *Cache) trimLocked(keep int) error {
	var err error
	for i := range c.slots {
		if i == keep || c.slots[i].busy.Load() {
			continue
		}
		err = errors.Join(err, c.trimSlotLocked(i, 0))
	}
	return err
}

// trimSlotLocked unmaps slot i's pages from want on, in every plane, but never a page its
// tokens use; the caller holds c.mu.
func (c *Cache) trimSlotLocked(i, want int) error {
	s := &c.slots[i]
	s.busy.Store(true)
	s.floor.Store(-1)
	s.trimming.Store(true) // before reading used: see slot
	want = max(want, c.inUse(s))
	s.floor.Store(int64(want))
	var err error
	if n := int(s.mapped.Load()) - want; n > 0 {
		off := uint64(i)*c.slotSz + uint64(want)*c.page
		c.mu.Unlock()
		for _, r := range c.planes {
			err = errors.Join(err, r.Unmap(off, uint64(n)*c.page))
		}
		c.mu.Lock()
		// Even when some planes refused: their pages are no longer whole, so none of them
		// is counted; the next commit of the range, or Close, unmaps what stays.
		s.mapped.Store(int64(want))
		if err != nil {
			s.leftover = true
		}
		c.stats.Pages -= n
		c.stats.Trimmed += n
		c.stats.Bytes -= uint64(n) * c.bytesPerIndex()
	}
	s.trimming.Store(false)
	s.busy.Store(false)
	c.cond.Broadcast()
	return err
}

// Stats reports what the cache holds and did.
func (c *Cache) Stats() Stats {
	if !c.usable() {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close stops the committer, waits for it, and releases every page and the planes. It is
// idempotent; after a Close the driver refused in part, a later Close retries what failed.
func (c *Cache) Close() error {
	if !c.usable() {
		return fail("close", "", errNoCache)
	}
	c.mu.Lock()
	c.closed.Store(true)
	c.cond.Broadcast()
	c.mu.Unlock()
	c.kick()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.slots {
		for c.slots[i].busy.Load() { // an Ensure committing outside the lock
			c.cond.Wait()
		}
		c.slots[i].active.Store(false)
	}
	err := c.trimLocked(-1)
	for _, r := range c.planes { // what partial trims left (no driver call where nothing is)
		if e := r.Unmap(0, r.Size()); !errors.Is(e, vmm.ErrClosed) { // closed: by an earlier Close
			err = errors.Join(err, e)
		}
	}
	return fail("close", "", errors.Join(err, c.freePlanes(), c.pending.Retry()))
}

func (c *Cache) freePlanes() error {
	var err error
	for _, r := range c.planes {
		err = errors.Join(err, r.Close())
	}
	return err
}
