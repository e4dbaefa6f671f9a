package vmm

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
)

// Tx is one all-or-nothing operation made of typed steps: each step that succeeds records
// how to undo it, Commit keeps everything, and Rollback undoes the steps in reverse order.
// Undoing a step that made something (Create, Reserve, Map) closes it; a close the driver
// refuses goes to the Pending list given to Begin, to be retried later, so a failed
// operation leaks nothing. Steps that undo a change to existing state (Restore) must work:
// if one fails, Rollback reports ErrBroken.
//
// The building blocks (package buffer, sparse, peer, ipc) run every operation that makes
// more than one driver call as a Tx:
//
//	tx := m.Begin(&pending)
//	mem, err := tx.Create(size, props)
//	if err != nil {
//		return tx.Rollback(err)
//	}
//	if _, err := tx.Map(r, off, mem); err != nil {
//		return tx.Rollback(err)
//	}
//	tx.Commit()
//
// A Tx is used by one goroutine at a time. A nil Tx makes nothing: its steps fail with
// ErrInvalid before any driver call, Commit and Rollback have nothing to end, and
// OnRollback and Restore on it record nothing.
type Tx struct {
	m       *Manager
	pending *Pending
	own     bool // pending is the caller's, not the Manager's: a failed Restore breaks it
	undo    []undoStep
}

type undoStep struct {
	what    string
	undo    io.Closer // what Create, Reserve and Map made, or a closeFunc
	restore bool
}

// closeFunc is a recorded func as an io.Closer, which holds the objects the typed steps
// made without the allocation of a method value.
type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// Begin starts a transaction on m whose failed undo releases go to pending; with nil they
// go to the Manager's own list (Manager.Pending), which its next Create or Reserve retries.
func (m *Manager) Begin(pending *Pending) *Tx {
	if pending == nil {
		return &Tx{m: m, pending: m.Pending()}
	}
	return &Tx{m: m, pending: pending, own: true}
}

var errNoTx = invalid("a nil Tx (make one with Manager.Begin)")

// Create is Manager.Create; undone by closing the allocation.
func (t *Tx) Create(size uint64, p Props) (*Allocation, error) {
	if t == nil {
		return nil, opErr(errNoTx, "create", "%s on %v", units.Size(size), p.Location)
	}
	a, err := t.m.Create(size, p)
	return made(t, "release", a, err)
}

// Reserve is Manager.Reserve; undone by closing the reservation.
func (t *Tx) Reserve(size uint64, opts ...ReserveOption) (*Reservation, error) {
	if t == nil {
		return nil, opErr(errNoTx, "reserve", "%s", units.Size(size))
	}
	r, err := t.m.Reserve(size, opts...)
	return made(t, "free", r, err)
}

// Map maps the whole of a at offset off of r; undone by unmapping it.
func (t *Tx) Map(r *Reservation, off uint64, a *Allocation) (*Mapping, error) {
	if t == nil {
		return nil, rangeErr(errNoTx, "map", r.Base()+cu.DevicePtr(off), a.Size())
	}
	mp, err := r.Map(off, a)
	return made(t, "unmap", mp, err)
}

// made records closing c as the undo of the step that made it, when that step succeeded
// (err is nil), and returns c and err.
func made[C io.Closer](t *Tx, what string, c C, err error) (C, error) {
	if err == nil {
		t.undo = append(t.undo, undoStep{what: what, undo: c})
	}
	return c, err
}

// MapAll maps each allocation of allocs whole, one after another from offset off of r,
// and gives access to the whole run in one driver call (the driver sets access over
// adjacent mappings at once; none when access is empty): the way the building blocks lay
// memory out. Each mapping is undone by unmapping it. Tx.Add does the same and records the
// allocations as a Region's chunks.
func (t *Tx) MapAll(r *Reservation, off uint64, access []cu.MemAccessDesc, allocs ...*Allocation) ([]*Mapping, error) {
	if t == nil {
		return nil, rangeErr(errNoTx, "map", r.Base()+cu.DevicePtr(off), 0)
	}
	start := off
	mps := make([]*Mapping, 0, len(allocs))
	for _, a := range allocs {
		mp, err := t.Map(r, off, a)
		if err != nil {
			return nil, err
		}
		mps = append(mps, mp)
		off += a.Size()
	}
	if len(access) > 0 && off > start {
		if err := r.SetAccess(start, off-start, access...); err != nil {
			return nil, err
		}
	}
	return mps, nil
}

// OnRollback records a release of something the transaction made, run by Rollback; if it
// fails it goes to the Pending list.
func (t *Tx) OnRollback(what string, release func() error) {
	if t == nil {
		return
	}
	t.undo = append(t.undo, undoStep{what: what, undo: closeFunc(release)})
}

// Restore records how to put back existing state that a step changed (mappings removed
// from a buffer, say), run by Rollback; if it fails, Rollback reports ErrBroken and the
// Pending given to Begin is broken.
func (t *Tx) Restore(what string, restore func() error) {
	if t == nil {
		return
	}
	t.undo = append(t.undo, undoStep{what: what, undo: closeFunc(restore), restore: true})
}

// Commit ends the transaction, keeping what it made.
func (t *Tx) Commit() {
	if t != nil {
		t.undo = nil
	}
}

// Rollback undoes every recorded step, last first, and returns cause. A release that fails
// is kept in the Pending list given to Begin, or the Manager's; a restore that fails joins
// an error matching ErrBroken, which says that the object the transaction worked on no
// longer holds what it held before, and marks the Pending given to Begin broken
// (Pending.Broken).
func (t *Tx) Rollback(cause error) error {
	if t == nil {
		return cause
	}
	errs := []error{cause}
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := t.undo[i]
		err := u.undo.Close()
		switch {
		case err == nil:
		case u.restore:
			err = fmt.Errorf("%w: %s: %w", ErrBroken, u.what, err)
			if t.own {
				t.pending.breakWith(err)
			}
			errs = append(errs, err)
		case t.pending != nil:
			t.pending.Add(u.what, u.undo.Close)
		default:
			errs = append(errs, err)
		}
	}
	t.undo = nil
	if len(errs) == 1 {
		return cause
	}
	return errors.Join(errs...)
}

// Pending is what failed undoing leaves an object that owns driver resources: the releases
// the driver refused (a Close of an Allocation, Reservation or Mapping that failed), to be
// retried later, and whether a transaction's Restore failed, which breaks the object. The
// object keeps one, retries it at its next operation and at its Close, reports its length
// and refuses work once it is broken, so that a transient refusal leaks nothing and a lost
// state is never used. The zero value is empty and ready; a Pending is safe for concurrent
// use. A nil Pending (a nil Manager's) is empty and stays so: Len is 0, Broken nil, Retry and
// MoveTo do nothing, Do runs the release without keeping it, and Add drops it.
type Pending struct {
	mu     sync.Mutex
	items  []pendingItem
	n      atomic.Int64 // len(items), so that an empty list is retried without the lock
	broken error
}

type pendingItem struct {
	what string
	do   func() error
}

// Do runs release and keeps it for Retry if it fails; it returns release's error.
func (p *Pending) Do(what string, release func() error) error {
	err := release()
	if err != nil {
		p.Add(what, release)
	}
	return err
}

// Add keeps release for Retry.
func (p *Pending) Add(what string, release func() error) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.items = append(p.items, pendingItem{what, release})
	p.n.Store(int64(len(p.items)))
	p.mu.Unlock()
}

// MoveTo hands every kept release to q (an object that could not be made gives what it
// failed to undo to its Manager's list: Manager.Pending); with a nil q it keeps them.
func (p *Pending) MoveTo(q *Pending) {
	if p == q || p == nil || q == nil {
		return
	}
	for _, it := range p.take() {
		q.Add(it.what, it.do)
	}
}

// Retry runs the kept releases in the order they were added, keeps those that fail again,
// and returns their errors joined (nil when none is left).
func (p *Pending) Retry() error {
	if p == nil || p.n.Load() == 0 {
		return nil
	}
	var errs []error
	var left []pendingItem
	for _, it := range p.take() {
		if err := it.do(); err != nil {
			left = append(left, it)
			errs = append(errs, err)
		}
	}
	if len(left) > 0 {
		p.mu.Lock()
		p.items = append(left, p.items...)
		p.n.Store(int64(len(p.items)))
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// take empties the list and returns what it held.
func (p *Pending) take() []pendingItem {
	p.mu.Lock()
	defer p.mu.Unlock()
	items := p.items
	p.items = nil
	p.n.Store(0)
	return items
}

// Len is how many releases wait for a retry.
func (p *Pending) Len() int {
	if p == nil {
		return 0
	}
	return int(p.n.Load())
}

// Broken is the error of the failed Restore that broke the object (matching ErrBroken), or
// nil.
func (p *Pending) Broken() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}

func (p *Pending) breakWith(err error) {
	p.mu.Lock()
	if p.broken == nil {
		p.broken = err
	}
	p.mu.Unlock()
}
