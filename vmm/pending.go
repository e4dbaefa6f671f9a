package vmm

import (
	"errors"
	"sync"
	"sync/atomic"
)

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
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.broken == nil {
		p.broken = err
	}
	p.mu.Unlock()
}
