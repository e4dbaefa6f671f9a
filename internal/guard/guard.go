// Package guard keeps the calls on one object apart from that object's release, with no
// lock shared by unrelated objects.
//
// A Guard counts the calls in flight on its object. A call pins the object with Enter and
// unpins it with Exit; the release first Drains (new Enters fail, and Drain waits until
// every pinned call has exited), then either Retires the object (released: every later
// Enter fails) or Reopens it (the release failed: the object is usable again). Enter and
// Exit are one atomic operation each on the object's own state, so calls on different
// objects never wait for each other, and calls on one object wait only for its release.
//
// A generation number tells one use of a slot from the next, for tables that recycle
// guards (package cu's handle table): Enter(gen) pins only the generation asked for, and
// Retire moves to the next one, so a stale reference can never pin the slot's next user.
//
// The caller serializes Drain, Reopen, Retire and Revive on one Guard (the object's own
// mutex does that); Enter and Exit may run from any goroutine at any time.
package guard

import "sync/atomic"

// The state word: generation in the high 32 bits, then two flags, then the pin count.
const (
	closedBit  = 1 << 31 // the object was released: Enter fails until Revive
	drainBit   = 1 << 30 // a release is waiting for the pins to drain: Enter fails
	pinMask    = drainBit - 1
	genShift   = 32
	flagsMask  = closedBit | drainBit
	maxPinning = pinMask // pins beyond this would carry into the flags
)

// Guard counts the calls in flight on one object. The zero value is an open object of
// generation 0.
type Guard struct {
	state atomic.Uint64
	// drained is made by a Drain that has to wait, and closed by the Exit that lets the
	// last pinned call go; a release with no call in flight allocates nothing.
	drained atomic.Pointer[chan struct{}]
}

// Enter pins the object for one call if it is open and of generation gen, and reports
// whether it did. A successful Enter must be followed by exactly one Exit.
func (g *Guard) Enter(gen uint32) bool {
	for {
		s := g.state.Load()
		if uint32(s>>genShift) != gen || s&flagsMask != 0 || s&pinMask == maxPinning {
			return false
		}
		if g.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// Exit ends a call that Enter pinned.
func (g *Guard) Exit() {
	// Draining with no pin left; one comparison keeps Exit within the inlining budget.
	if g.state.Add(^uint64(0))&(drainBit|pinMask) == drainBit {
		g.wake()
	}
}

// wake lets a waiting Drain go on. It is out of line so that Exit stays inlinable.
//
//go:noinline
func (g *Guard) wake() {
	if ch := g.drained.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Gen returns the current generation.
func (g *Guard) Gen() uint32 { return uint32(g.state.Load() >> genShift) }

// Open reports whether the object is open (neither released nor being released).
func (g *Guard) Open() bool { return g.state.Load()&flagsMask == 0 }

// Retired reports whether the object was released (Retire), not only being released.
func (g *Guard) Retired() bool { return g.state.Load()&closedBit != 0 }

// Drain makes every later Enter fail and waits until the calls in flight have exited. It
// returns false, and does nothing, if the object is not open.
func (g *Guard) Drain() bool {
	for {
		s := g.state.Load()
		if s&flagsMask != 0 {
			return false
		}
		if s&pinMask == 0 {
			if g.state.CompareAndSwap(s, s|drainBit) {
				return true
			}
			continue
		}
		// Calls are in flight: publish the channel the last of them will close before
		// raising the flag, so that the Exit that sees the flag finds the channel.
		ch := make(chan struct{})
		g.drained.Store(&ch)
		if g.state.CompareAndSwap(s, s|drainBit) {
			<-ch
			return true
		}
		g.drained.Store(nil)
	}
}

// Reopen undoes a Drain: the release failed and the object stays in use.
func (g *Guard) Reopen() { g.state.And(^uint64(drainBit)) }

// Retire marks a drained object released and moves it to the next generation; every later
// Enter fails until Revive.
func (g *Guard) Retire() {
	next := g.Gen() + 1
	if next == 0 {
		next = 1 // generation 0 is the zero value's; a recycled slot never returns to it
	}
	g.state.Store(uint64(next)<<genShift | closedBit)
}

// Revive opens a retired guard for its next user and returns the generation that user's
// Enter calls must name.
func (g *Guard) Revive() uint32 {
	gen := g.Gen()
	g.state.Store(uint64(gen) << genShift)
	return gen
}
