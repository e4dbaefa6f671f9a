package sleep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// Mode is how a tag sleeps.
type Mode int

const (
	// Offload copies the memory to host memory and releases the device memory; Wake
	// creates it again, maps it at the same addresses and copies the bytes back. Nothing
	// may touch the range while it sleeps.
	Offload Mode = iota + 1
	// Park copies the memory to host memory and maps that at the same addresses for the
	// device, then releases the device memory: device code that reads or writes the range
	// while it sleeps works, at the speed of the host link. Wake moves it back.
	Park
	// Discard releases the device memory; Wake gives fresh memory that reads zero.
	Discard
)

func (m Mode) String() string {
	if m < Offload || m > Discard {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return [...]string{Offload: "offload", Park: "park", Discard: "discard"}[m]
}

// State is where one chunk's bytes are.
type State int

const (
	Resident  State = iota // in device memory, mapped
	Offloaded              // in host memory; nothing mapped at its addresses
	Parked                 // in host memory, mapped at its addresses for the device
	Discarded              // nowhere; Wake makes zeros
)

func (s State) String() string {
	if s < Resident || s > Discarded {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return [...]string{"resident", "offloaded", "parked", "discarded"}[s]
}

// ErrAsleep is what a read or write of memory that sleeps without a mapping (offloaded or
// discarded) returns, and what the region's owner gets when it changes a sleeping region.
var ErrAsleep = vmm.ErrAsleep

// ErrShared is why Tag and Sleep refuse memory exported to another process or device, or
// imported from one (vmm.Allocation.Shared).
var ErrShared = errors.New("shared memory cannot sleep: the other side holds the allocation, so releasing it frees nothing, and memory put in its place would not be what the other side sees")

// Options configure a Pool.
type Options struct {
	// Chunk is the size of each allocation a Region is made of, rounded up to the
	// granularity of device and host memory; 64 MiB when 0. Larger chunks make fewer
	// driver calls per GiB (each create, map and release has a fixed cost).
	Chunk uint64
	// ReleaseHost releases each chunk's host memory when it wakes; by default it is kept,
	// so that the next sleep pins nothing on its way (pinning host memory runs at 2-4 GiB/s).
	ReleaseHost bool
}

// Pool is memory grouped under tags, each of which can sleep and wake as a whole. All its
// methods are safe for concurrent use; sleeps, wakes, allocations and closes run one at a
// time, reads and writes alongside each other.
type Pool struct {
	m     *vmm.Manager
	chunk uint64
	keep  bool

	mu      sync.RWMutex
	regions map[string][]*Region  // made by Alloc
	tagged  map[string][]*tagging // put under a tag by Tag
	closed  bool
	hostG   uint64 // the host memory's granularity, once a Tag asked
	// pending are the releases the driver refused, retried by each sleep, wake and close.
	pending vmm.Pending
}

// Region is a range of device addresses of one tag, made of chunks; its addresses never
// change, whatever the tag's sleep.
type Region struct {
	p      *Pool
	tag    string
	dev    int
	size   uint64
	g      *vmm.Region // the addresses, and the memory mapped there
	stage  *vmm.Region // the chunks' host memory, mapped for the copies
	chunks []*chunk
	closed bool
}

type chunk struct {
	off, size uint64
	state     State
	props     vmm.Props       // what its device memory is made with
	dev       *vmm.Allocation // device memory, while resident (g's chunk)
	host      *vmm.Allocation // host memory, mapped in the region's stage, once prepared
	unparked  bool            // a wake took its host mapping away and has not filled it yet
}

// asleep is a chunk's state after a sleep in each mode.
var asleep = [...]State{Offload: Offloaded, Park: Parked, Discard: Discarded}

// New returns a Pool over m.
func New(m *vmm.Manager, opts Options) *Pool {
	c := opts.Chunk
	if c == 0 {
		c = 64 << 20
	}
	return &Pool{m: m, chunk: c, keep: !opts.ReleaseHost, regions: map[string][]*Region{}, tagged: map[string][]*tagging{}}
}

var errNoPool = fmt.Errorf("%w: a nil Pool or Region (make them with New and Alloc)", vmm.ErrInvalid)

func (p *Pool) usable() bool { return p != nil && p.m != nil }

// regionsOf is tag's regions, the tagged memory's as it is now, or an error for a tag
// with none (a typo would otherwise make every call a silent no-op); the caller holds p.mu
// exclusively.
func (p *Pool) regionsOf(tag string) ([]*Region, error) {
	if p.closed {
		return nil, vmm.ErrClosed
	}
	rs := slices.Clone(p.regions[tag])
	for _, t := range p.tagged[tag] {
		trs, err := p.sync(tag, t)
		if err != nil {
			return nil, err
		}
		rs = append(rs, trs...)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no region has tag %q", vmm.ErrInvalid, tag)
	}
	return rs, nil
}

func fail(op, args string, err error) error {
	if err == nil {
		return nil
	}
	return &vmm.Error{Pkg: "sleep", Op: op, Args: args, Err: err}
}

// Alloc makes a region of size bytes of device dev's memory under tag, mapped read-write
// for dev.
func (p *Pool) Alloc(tag string, size uint64, dev int) (*Region, error) {
	args := fmt.Sprintf("%s on device %d for tag %q", units.Size(size), dev, tag)
	if !p.usable() {
		return nil, fail("alloc", args, errNoPool)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fail("alloc", args, vmm.ErrClosed)
	}
	if size == 0 {
		return nil, fail("alloc", args, fmt.Errorf("%w: an empty region", vmm.ErrInvalid))
	}
	// A chunk is made of device memory, or of host memory while it sleeps: it takes the
	// larger of their granularities.
	gd, err := p.m.Granularity(vmm.DeviceProps(dev), false)
	if err != nil {
		return nil, fail("alloc", args, err)
	}
	gh, err := p.m.Granularity(vmm.Props{Location: vmm.OnHost()}, false)
	if err != nil {
		return nil, fail("alloc", args, err)
	}
	g := max(gd, gh)
	if size > 1<<62 || p.chunk > 1<<62 {
		return nil, fail("alloc", args, fmt.Errorf("%w: the region or its chunks are over 4 EiB", vmm.ErrTooLarge))
	}
	csize := (p.chunk + g - 1) / g * g
	size = (size + g - 1) / g * g
	_ = p.pending.Retry()
	tx := p.m.Begin(&p.pending)
	vg, err := tx.NewRegion(size, dev)
	if err != nil {
		return nil, fail("alloc", args, tx.Rollback(err))
	}
	reg := &Region{p: p, tag: tag, dev: dev, size: size, g: vg}
	var mems []*vmm.Allocation
	for off := uint64(0); off < size; off += csize {
		a, err := tx.Create(min(csize, size-off), vmm.DeviceProps(dev))
		if err != nil {
			return nil, fail("alloc", args, tx.Rollback(err))
		}
		mems = append(mems, a)
		reg.chunks = append(reg.chunks, &chunk{off: off, size: a.Size(), props: vmm.DeviceProps(dev), dev: a})
	}
	if err := tx.Add(vg, 0, vmm.ReadWrite(dev), mems...); err != nil {
		return nil, fail("alloc", args, tx.Rollback(err))
	}
	tx.Commit()
	p.regions[tag] = append(p.regions[tag], reg)
	return reg, nil
}

// Base is the region's first address (0 for a nil Region).
func (r *Region) Base() cu.DevicePtr {
	if r == nil {
		return 0
	}
	return r.g.Base()
}

// Size is the region's size (0 for a nil Region).
func (r *Region) Size() uint64 {
	if r == nil {
		return 0
	}
	return r.size
}

// Tag is the tag the region sleeps and wakes with.
func (r *Region) Tag() string {
	if r == nil {
		return ""
	}
	return r.tag
}

// ReadAt copies from the region at off into p, from the region's device; it fails with
// ErrAsleep while a chunk it touches has no mapping (offloaded or discarded). Parked
// memory is read through the host link.
func (r *Region) ReadAt(p []byte, off int64) (int, error) {
	return r.copyAt("read", p, off, (*vmm.Region).ReadAt)
}

// WriteAt copies p into the region at off, as ReadAt.
func (r *Region) WriteAt(p []byte, off int64) (int, error) {
	return r.copyAt("write", p, off, (*vmm.Region).WriteAt)
}

func (r *Region) copyAt(op string, b []byte, off int64, cp func(*vmm.Region, []byte, int64) (int, error)) (int, error) {
	if r == nil || r.p == nil {
		return 0, fail(op, "", errNoPool)
	}
	args := fmt.Sprintf("%s at %v+%d (tag %q)", units.Size(uint64(len(b))), r.Base(), off, r.tag)
	r.p.mu.RLock()
	defer r.p.mu.RUnlock()
	n, err := cp(r.g, b, off) // vmm.ErrClosed once Close has closed g
	return n, fail(op, args, err)
}

// States counts the bytes of tag in each state.
func (p *Pool) States(tag string) map[State]uint64 {
	if !p.usable() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := map[State]uint64{}
	rs, _ := p.regionsOf(tag)
	for _, r := range rs {
		for _, c := range r.chunks {
			s[c.state] += c.size
		}
	}
	return s
}

// Prepare makes the host memory of every chunk of tag that has none, and maps it for the
// copies, so that a later Offload or Park pins nothing on its way (see Options.ReleaseHost).
func (p *Pool) Prepare(tag string) error {
	return p.onTag("prepare", fmt.Sprintf("tag %q", tag), tag, func(rs []*Region) error {
		_ = p.pending.Retry()
		for _, r := range rs {
			for _, c := range r.chunks {
				if err := r.prepare(c); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// onTag runs do on tag's regions under p.mu, naming op and its arguments on error.
func (p *Pool) onTag(op, args, tag string, do func(rs []*Region) error) error {
	if !p.usable() {
		return fail(op, args, errNoPool)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rs, err := p.regionsOf(tag)
	if err != nil {
		return fail(op, args, err)
	}
	return fail(op, args, do(rs))
}

// prepare gives c host memory mapped at its place in the region's stage, readable and
// writable by the region's device.
func (r *Region) prepare(c *chunk) error {
	if c.host != nil {
		return nil
	}
	tx := r.p.m.Begin(&r.p.pending)
	if r.stage == nil {
		s, err := tx.NewRegion(r.size, r.dev)
		if err != nil {
			return tx.Rollback(err)
		}
		r.stage = s
		tx.OnRollback("forget the stage", func() error { r.stage = nil; return nil })
	}
	h, err := tx.Create(c.size, vmm.Props{Location: vmm.OnHost()})
	if err != nil {
		return tx.Rollback(err)
	}
	if err := tx.Add(r.stage, c.off, vmm.ReadWrite(r.dev), h); err != nil {
		return tx.Rollback(err)
	}
	tx.Commit()
	c.host = h
	return nil
}

func (r *Region) addr(c *chunk) cu.DevicePtr   { return r.g.Base() + cu.DevicePtr(c.off) }
func (r *Region) staged(c *chunk) cu.DevicePtr { return r.stage.Base() + cu.DevicePtr(c.off) }

// work is one chunk of one region, passed from one stage of a pipeline to the next.
type work struct {
	r *Region
	c *chunk
}

// Sleep puts every chunk of tag that is resident to sleep in mode; chunks already asleep
// stay as they are (but an offloaded chunk asked to park is parked: its range becomes
// usable), so sleeping twice is sleeping once. The copy of one chunk overlaps the release
// of the one before. On an error (the context's too) the chunks done so far sleep and the
// others stay resident: the tag is consistent, and Sleep can be called again.
func (p *Pool) Sleep(ctx context.Context, tag string, mode Mode) error {
	args := fmt.Sprintf("tag %q, %v", tag, mode)
	if mode < Offload || mode > Discard {
		return fail("sleep", args, fmt.Errorf("%w: mode %d", vmm.ErrInvalid, int(mode)))
	}
	return p.onTag("sleep", args, tag, func(rs []*Region) error { return p.sleep(ctx, rs, mode) })
}

// sleep is Sleep of the regions rs; the caller holds p.mu.
func (p *Pool) sleep(ctx context.Context, rs []*Region, mode Mode) error {
	_ = p.pending.Retry() // what the driver refuses again stays listed; Close reports it
	var todo []work
	for _, r := range rs {
		for _, c := range r.chunks {
			if c.state == Resident || (mode == Park && c.state == Offloaded) {
				todo = append(todo, work{r, c})
			}
		}
	}
	for _, w := range todo {
		if w.c.dev.Shared() {
			return fmt.Errorf("%w: the chunk at %v", ErrShared, w.r.addr(w.c))
		}
	}
	copyOut := func(w work) error {
		if mode == Discard || w.c.state != Resident {
			return nil
		}
		if err := w.r.prepare(w.c); err != nil {
			return err
		}
		return p.m.Copy(w.r.dev, w.r.staged(w.c), w.r.addr(w.c), w.c.size)
	}
	release := func(w work) error {
		var in *vmm.Allocation // what goes in the chunk's place
		if mode == Park {
			in = w.c.host
		}
		old, err := w.r.g.Swap(w.c.off, in, true)
		switch {
		case err != nil && (old == nil) == (w.c.state == Resident):
			return err // the unmap failed: nothing changed
		case err != nil: // unmapped, but the host memory is not in its place, though it
			w.c.state = Offloaded // holds the bytes
		default:
			w.c.state = asleep[mode]
		}
		if w.c.dev != nil {
			err = errors.Join(err, p.pending.Do("release of a chunk's device memory", w.c.dev.Close))
			w.c.dev = nil
		}
		return err
	}
	return pipeline(ctx, todo, copyOut, release)
}

// Wake brings every chunk of tag that sleeps back to device memory at its addresses;
// resident chunks stay as they are, so waking twice is waking once. The creation and
// mapping of one chunk overlap the copy of the one before. When a device has not the
// memory, Wake fails with an error saying how much the tag needs there and how much is
// free; the chunks not yet woken still sleep with their bytes, and Wake can be retried.
func (p *Pool) Wake(ctx context.Context, tag string) error {
	return p.onTag("wake", fmt.Sprintf("tag %q", tag), tag, func(rs []*Region) error { return p.wake(ctx, rs) })
}

// wake is Wake of the regions rs; the caller holds p.mu.
func (p *Pool) wake(ctx context.Context, rs []*Region) error {
	_ = p.pending.Retry()
	var todo []work
	need := map[int]uint64{} // by device
	for _, r := range rs {
		for _, c := range r.chunks {
			if c.state != Resident {
				todo = append(todo, work{r, c})
				need[int(c.props.Location.ID)] += c.size
			}
		}
	}
	// create makes and maps the chunk's device memory (a parked chunk's host mapping
	// goes first); its bytes are still to copy.
	create := func(w work) error {
		if w.c.dev != nil {
			return nil // mapped by a wake that did not finish
		}
		a, err := p.m.Create(w.c.size, w.c.props)
		if err != nil {
			if errors.Is(err, cu.ERROR_OUT_OF_MEMORY) {
				have := "unknown free memory"
				dev := int(w.c.props.Location.ID)
				if free, _, ferr := p.m.MemInfo(dev); ferr == nil {
					have = units.Size(free) + " free"
				}
				return fail("need", fmt.Sprintf("%s more on device %d, which has %s", units.Size(need[dev]), dev, have), err)
			}
			return err
		}
		// Marked awake once its bytes are back (fill); until then it still sleeps.
		old, err := w.r.g.Swap(w.c.off, a, true)
		if err != nil && old == nil && w.c.state == Parked {
			return errors.Join(err, p.pending.Do("release of a chunk's device memory", a.Close)) // still parked
		}
		if w.c.state == Parked { // the host memory holds the bytes until the copy
			w.c.unparked = true
			w.c.state = Offloaded
		}
		if err != nil {
			return errors.Join(err, p.pending.Do("release of a chunk's device memory", a.Close), w.r.repark(w.c))
		}
		w.c.dev = a
		need[int(w.c.props.Location.ID)] -= w.c.size
		return nil
	}
	fill := func(w work) error {
		var err error
		if w.c.state == Discarded {
			err = p.m.Fill(w.r.dev, w.r.addr(w.c), 0, w.c.size)
		} else {
			err = p.m.Copy(w.r.dev, w.r.addr(w.c), w.r.staged(w.c), w.c.size)
		}
		if err != nil {
			return err
		}
		if _, err := w.r.g.Swap(w.c.off, w.c.dev, false); err != nil {
			return err
		}
		w.c.state, w.c.unparked = Resident, false
		if !p.keep && w.c.host != nil {
			err = w.r.dropHost(w.c)
		}
		return err
	}
	err := pipeline(ctx, todo, create, fill)
	// A chunk mapped but not filled goes back to sleep as it slept: its device memory is
	// released again, and its bytes are where they were.
	for _, w := range todo {
		if w.c.state == Resident || w.c.dev == nil {
			continue
		}
		if _, uerr := w.r.g.Swap(w.c.off, nil, true); uerr != nil {
			err = errors.Join(err, uerr) // still mapped: the next wake fills it, or Close unmaps it
			continue
		}
		err = errors.Join(err, p.pending.Do("release of a chunk's device memory", w.c.dev.Close), w.r.repark(w.c))
		w.c.dev = nil
	}
	return err
}

// repark maps c's host memory back at its addresses when c was parked before a wake that
// did not finish.
func (r *Region) repark(c *chunk) error {
	if !c.unparked {
		return nil
	}
	// Swap maps it with the access the chunk had.
	if _, err := r.g.Swap(c.off, c.host, true); err != nil {
		return err // offloaded, then: the bytes are in host memory
	}
	c.state, c.unparked = Parked, false
	return nil
}

// dropHost releases c's host memory; it stays c's while its stage mapping does.
func (r *Region) dropHost(c *chunk) error {
	tx := r.p.m.Begin(&r.p.pending)
	if _, err := tx.Remove(r.stage, c.off, c.size); err != nil {
		return tx.Rollback(err)
	}
	tx.Commit()
	err := r.p.pending.Do("release of a chunk's host memory", c.host.Close)
	c.host = nil
	return err
}

// pipeline runs first on each item, in order, and second on each item first finished
// with, in a goroutine of its own, so that the two overlap; it stops at the first error or
// when ctx is done, and waits for both before it returns.
func pipeline(ctx context.Context, items []work, first, second func(work) error) error {
	ch := make(chan work, 1)
	errc := make(chan error, 1)
	stop := make(chan struct{}) // closed when second fails: first stops too
	go func() {
		var err error
		for w := range ch {
			if err == nil {
				if err = second(w); err != nil {
					close(stop)
				}
			}
		}
		errc <- err
	}()
	var err error
loop:
	for _, w := range items {
		select {
		case <-stop:
			break loop
		default:
		}
		if err = ctx.Err(); err != nil {
			break
		}
		if err = first(w); err != nil {
			break
		}
		select {
		case ch <- w:
		case <-stop:
			break loop
		}
	}
	close(ch)
	return errors.Join(err, <-errc)
}

// Close releases the region's memory, device and host, and its addresses, in whatever
// state its chunks are. It is idempotent; after a failure (a release the driver refused) it
// can be called again, and goes on from where it stopped.
func (r *Region) Close() error {
	if r == nil || r.p == nil {
		return fail("close", "", errNoPool)
	}
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	if err := r.closeLocked(); err != nil {
		return err
	}
	rs := r.p.regions[r.tag]
	if i := slices.Index(rs, r); i >= 0 {
		setTag(r.p.regions, r.tag, append(rs[:i:i], rs[i+1:]...))
	}
	return nil
}

// closeLocked is Close under p.mu: each step is recorded as it succeeds, for a retry.
func (r *Region) closeLocked() error {
	if r.closed {
		return nil
	}
	args := fmt.Sprintf("%s at %v (tag %q)", units.Size(r.size), r.Base(), r.tag)
	// Only the pool's regions (Alloc) are closed, not tagged ones. The chunks' device
	// memory, and host memory parked in their place, go with g.
	if err := r.g.Close(); err != nil {
		return fail("close", args, err)
	}
	if err := r.dropStage(); err != nil {
		return fail("close", args, err)
	}
	r.closed = true
	return nil
}

// dropStage releases the region's host memory and the range it is mapped in for the
// copies; a later sleep makes them again. What the driver refuses is kept in the pool's
// pending list, not in the region: the stage is gone either way.
func (r *Region) dropStage() error {
	if r.stage == nil {
		return nil
	}
	err := r.p.pending.Do("release of a region's host memory", r.stage.Close)
	r.stage = nil
	for _, c := range r.chunks {
		c.host = nil
	}
	return err
}

// ReleaseHost releases the host memory of tag's resident chunks, which Prepare made and
// every sleep keeps for the next one.
func (p *Pool) ReleaseHost(tag string) error {
	return p.onTag("release host", fmt.Sprintf("tag %q", tag), tag, func(rs []*Region) error {
		for _, r := range rs {
			for _, c := range r.chunks {
				if c.state == Resident && c.host != nil {
					if err := r.dropHost(c); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

// Close closes every region the pool allocated, whatever its state, and gives tagged
// memory back to its owners awake: it wakes, then its host memory is released. If tagged
// memory cannot wake, Close fails with nothing closed, the memory asleep with its bytes,
// and can be called again. It is idempotent; what the driver refused stays for the next
// Close.
func (p *Pool) Close() error {
	if !p.usable() {
		return fail("close", "pool", errNoPool)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	for tag, ts := range p.tagged {
		// Tagged memory is its owner's: it wakes before its host memory goes.
		var left []*tagging
		for _, t := range ts {
			rs, terr := p.sync(tag, t)
			if terr == nil {
				terr = p.wake(context.Background(), rs)
			}
			for _, r := range rs {
				if terr == nil {
					terr = r.dropStage()
				}
			}
			if terr != nil {
				err = errors.Join(err, fail("close", fmt.Sprintf("%T under tag %q", t.mem, tag), terr))
				left = append(left, t)
			}
		}
		setTag(p.tagged, tag, left)
	}
	if err != nil {
		return err // nothing closed yet: the tagged memory sleeps with its bytes
	}
	p.closed = true
	for tag, rs := range p.regions {
		var left []*Region
		for _, r := range rs {
			if cerr := r.closeLocked(); cerr != nil {
				err = errors.Join(err, cerr)
				left = append(left, r)
			}
		}
		setTag(p.regions, tag, left)
	}
	return errors.Join(err, p.pending.Retry())
}

// setTag makes v tag's list in m, or forgets tag when v is empty.
func setTag[T any](m map[string][]T, tag string, v []T) {
	if len(v) == 0 {
		delete(m, tag)
	} else {
		m[tag] = v
	}
}
