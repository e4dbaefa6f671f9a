package cu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/cuvmm/cuvmm/internal/guard"
)

// Context is a device's primary context, retained. Calls that need a current context run
// through it: each makes the context current on a locked OS thread for its duration, so the
// calling goroutine never carries thread-bound state and never exits locked.
//
// Calls through one Context run in parallel; Release waits for those in flight and
// refuses new ones (a released context's handle must not reach the driver).
type Context struct {
	dev    Device
	h      uintptr // CUcontext
	shared bool    // from Device.Primary: never released

	g  guard.Guard // the calls in flight
	mu sync.Mutex  // serializes Release
}

// PrimaryContext retains d's primary context (cuDevicePrimaryCtxRetain). Release it with
// Release; most programs use [Device.Primary] instead, which is retained once per process.
func (d Device) PrimaryContext() (*Context, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	h, err := cuDevicePrimaryCtxRetain(d)
	if err != nil {
		return nil, wrap(err, "cuDevicePrimaryCtxRetain", "%d", d)
	}
	return &Context{dev: d, h: h}, nil
}

var primaries sync.Map // Device -> *primaryEntry

type primaryEntry struct {
	once sync.Once
	ctx  *Context
	err  error
}

// Primary returns d's primary context, retained on first use and kept for the life of the
// process (as the CUDA runtime does). Its Release does nothing.
func (d Device) Primary() (*Context, error) {
	v, ok := primaries.Load(d)
	if !ok {
		v, _ = primaries.LoadOrStore(d, &primaryEntry{})
	}
	e := v.(*primaryEntry)
	e.once.Do(func() {
		e.ctx, e.err = d.PrimaryContext()
		if e.ctx != nil {
			e.ctx.shared = true
		}
	})
	return e.ctx, e.err
}

// Device returns the context's device; -1 for a nil Context.
func (c *Context) Device() Device {
	if c == nil {
		return -1
	}
	return c.dev
}

// Release drops the reference taken by PrimaryContext (cuDevicePrimaryCtxRelease_v2), once
// the calls in flight through c have returned. It is idempotent; the shared context of
// Device.Primary is never released, and a nil or zero Context holds no reference to drop.
func (c *Context) Release() error {
	if c == nil || c.shared || c.h == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.g.Drain() {
		return nil
	}
	if err := cuDevicePrimaryCtxRelease(c.dev); err != nil {
		c.g.Reopen()
		return wrap(err, "cuDevicePrimaryCtxRelease", "%d", c.dev)
	}
	c.g.Retire()
	return nil
}

// Do runs f with the context current on a locked OS thread. f must not start goroutines that
// rely on the context: they run on other threads.
func (c *Context) Do(f func() error) error {
	if c == nil || c.h == 0 || !c.g.Enter(0) {
		return fmt.Errorf("cu: context: %w", ErrContextReleased)
	}
	defer c.g.Exit()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cuCtxSetCurrent(c.h); err != nil {
		return wrap(err, "cuCtxSetCurrent", "device %d", c.dev)
	}
	return f()
}

// Synchronize waits for all work of the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return c.Do(func() error {
		if err := cuCtxSynchronize(); err != nil {
			return wrap(err, "cuCtxSynchronize", "device %d", c.dev)
		}
		return nil
	})
}

// CurrentContext returns the CUcontext current on the calling OS thread, 0 for none. It is
// only meaningful with the goroutine locked to its thread; tests use it to check that cu
// leaves no context behind where it should not.
func CurrentContext() (uintptr, error) {
	c, err := cuCtxGetCurrent()
	if err != nil {
		return 0, wrap(err, "cuCtxGetCurrent", "")
	}
	return c, nil
}
