package sleep

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// Memory is what Tag puts under a tag: memory a building block or a caller laid out in
// vmm.Regions (*vmm.Region itself, *buffer.Buffer, *sparse.Array), which its owner may
// change while it is awake (see the package documentation).
type Memory interface {
	Regions() []*vmm.Region
}

// tagging is one Memory under a tag, and the pool's state of each of its regions.
type tagging struct {
	mem  Memory
	regs map[*vmm.Region]*Region
}

// Tag puts mem under tag, so that it sleeps and wakes with it; copies run from each
// region's device. Each chunk must be device memory that is not shared
// (vmm.Allocation.Shared: exported or imported memory fails with ErrShared), checked here
// and again for what mem holds at each Sleep. mem stays its owner's: while a chunk of a
// region sleeps, the region refuses its owner's changes with vmm.ErrAsleep (a buffer's
// Grow and Shrink, an array's Commit).
func (p *Pool) Tag(tag string, mem Memory) error {
	args := fmt.Sprintf("%T for tag %q", mem, tag)
	if !p.usable() {
		return fail("tag", args, errNoPool)
	}
	if mem == nil || !reflect.TypeOf(mem).Comparable() {
		return fail("tag", args, fmt.Errorf("%w: nil memory, or of a type that is not comparable", vmm.ErrInvalid))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fail("tag", args, vmm.ErrClosed)
	}
	regs := mem.Regions()
	for i, g := range regs {
		if slices.Contains(regs[:i], g) {
			return fail("tag", args, fmt.Errorf("%w: the memory lists its region at %v twice", vmm.ErrInvalid, g.Base()))
		}
		if other := p.taggedAs(mem, g); other != "" {
			return fail("tag", args, fmt.Errorf("%w: the memory, or its region at %v, is tagged %q already", vmm.ErrInvalid, g.Base(), other))
		}
	}
	t := &tagging{mem: mem, regs: map[*vmm.Region]*Region{}}
	if _, err := p.sync(tag, t); err != nil {
		return fail("tag", args, err)
	}
	p.tagged[tag] = append(p.tagged[tag], t)
	return nil
}

// taggedAs is the tag mem or g is under, or ""; the caller holds p.mu.
func (p *Pool) taggedAs(mem Memory, g *vmm.Region) string {
	for tag, ts := range p.tagged {
		for _, t := range ts {
			if t.mem == mem || slices.Contains(t.mem.Regions(), g) {
				return tag
			}
		}
	}
	for tag, rs := range p.regions {
		for _, r := range rs {
			if r.g == g {
				return tag
			}
		}
	}
	return ""
}

// Untag takes mem from its tag and releases the host memory the pool keeps for it. Memory
// that sleeps stays tagged: Untag fails with ErrAsleep (wake it first).
func (p *Pool) Untag(mem Memory) error {
	args := fmt.Sprintf("%T", mem)
	if !p.usable() {
		return fail("untag", args, errNoPool)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for tag, ts := range p.tagged {
		for i, t := range ts {
			if t.mem != mem {
				continue
			}
			rs, err := p.sync(tag, t)
			if err != nil {
				return fail("untag", args, err)
			}
			for _, r := range rs {
				for _, c := range r.chunks {
					if c.state != Resident {
						return fail("untag", args, fmt.Errorf("%w: the chunk at %v is %v", ErrAsleep, r.addr(c), c.state))
					}
				}
			}
			for _, r := range rs {
				if err := r.dropStage(); err != nil {
					return fail("untag", args, err)
				}
			}
			setTag(p.tagged, tag, append(ts[:i:i], ts[i+1:]...))
			return nil
		}
	}
	return fail("untag", args, fmt.Errorf("%w: not tagged", vmm.ErrInvalid))
}

// sync brings the pool's state of t's regions up to what t holds now: a region or chunk
// that is new is checked, and the host memory of one that is gone is released (a region
// with sleeping chunks refuses its owner's changes, so only awake ones go). The caller
// holds p.mu.
func (p *Pool) sync(tag string, t *tagging) ([]*Region, error) {
	gs := t.mem.Regions()
	regs := make(map[*vmm.Region]*Region, len(gs))
	out := make([]*Region, 0, len(gs))
	for _, g := range gs {
		if !p.m.SameBackend(g.Manager()) {
			return nil, fmt.Errorf("%w: the region at %v is of another backend than the pool's", vmm.ErrInvalid, g.Base())
		}
		r := t.regs[g]
		if r == nil {
			r = &Region{p: p, tag: tag, dev: g.Device(), size: g.Size(), g: g}
		}
		if err := p.syncChunks(r); err != nil {
			return nil, err
		}
		regs[g] = r
		out = append(out, r)
	}
	for g, r := range t.regs {
		if regs[g] == nil {
			_ = p.pending.Do("release of a region's host memory", r.dropStage)
		}
	}
	t.regs = regs
	return out, nil
}

// syncChunks brings r's chunks up to what its vmm.Region holds.
func (p *Pool) syncChunks(r *Region) error {
	have := make(map[uint64]*chunk, len(r.chunks))
	for _, c := range r.chunks {
		have[c.off] = c
	}
	var next []*chunk
	for _, c := range r.g.Chunks(0, r.g.Size()) {
		k := have[c.Off]
		if k != nil && k.size == c.Size && (k.state != Resident || k.dev == c.Alloc) {
			next = append(next, k)
			delete(have, c.Off)
			continue
		}
		props, err := p.check(r.g.Base(), c)
		if err != nil {
			return err
		}
		next = append(next, &chunk{off: c.Off, size: c.Size, props: props, dev: c.Alloc})
	}
	for _, k := range have {
		if k.host != nil {
			if err := r.dropHost(k); err != nil {
				return err
			}
		}
	}
	r.chunks = next
	return nil
}

// check says why c cannot sleep, or returns what its memory is made with, for its wake to
// make the same.
func (p *Pool) check(base cu.DevicePtr, c vmm.Chunk) (vmm.Props, error) {
	if p.hostG == 0 {
		g, err := p.m.Granularity(vmm.Props{Location: vmm.OnHost()}, false)
		if err != nil {
			return vmm.Props{}, err
		}
		p.hostG = g
	}
	at := func(err error, why string) (vmm.Props, error) {
		return vmm.Props{}, fmt.Errorf("%w: the chunk at %v (+%s of its region) %s", err, base+cu.DevicePtr(c.Off), units.Size(c.Off), why)
	}
	switch {
	case c.Asleep || c.Alloc == nil:
		return at(ErrAsleep, "sleeps already")
	case c.Alloc.Shared():
		return at(ErrShared, "was exported or imported")
	case c.Size%p.hostG != 0:
		return at(vmm.ErrInvalid, fmt.Sprintf("is %s, no multiple of the host memory's granularity", units.Size(c.Size)))
	}
	props, err := c.Alloc.Props()
	if err == nil && props.Location.Type != cu.MEM_LOCATION_TYPE_DEVICE {
		return at(vmm.ErrInvalid, fmt.Sprintf("is memory of %v, not of a device", props.Location))
	}
	return props, err
}
