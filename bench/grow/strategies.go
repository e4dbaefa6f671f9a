package main

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
)

// A grower is one way of growing a device buffer by a fixed step. The harness calls step
// for i = 0, 1, ... (growing the buffer from i*step to (i+1)*step bytes), then teardown,
// also after a failed step: teardown releases whatever the strategy holds.
type grower interface {
	step(i int) error
	teardown() error
	// counters reports what the strategy counted: reservations extended in place,
	// remaps to a new range, and device-to-device copies.
	counters() (extends, remaps, copies int)
}

// strategy names a grower and how to make one.
type strategy struct {
	name string
	desc string
	// needsContext marks the cuMemAlloc strategies, which sim cannot run.
	needsContext bool
	newGrower    func(h *harness) grower
}

// strategies, in the order they run: the growable buffer with both policies, then grow.c's
// four in grow.c's order.
var strategies = []strategy{
	{name: "buffer_geometric", desc: "vmm/buffer, geometric policy (chunks double, MinChunk = step), VA reserved ahead",
		newGrower: func(h *harness) grower { return newBufferGrower(h, buffer.Geometric) }},
	{name: "buffer_exact", desc: "vmm/buffer, exact policy (one chunk per step), VA reserved ahead",
		newGrower: func(h *harness) grower { return newBufferGrower(h, buffer.Exact) }},
	{name: "vmm_reserved", desc: "grow.c (1): VMM, whole VA reserved up front, create+map+set access per step",
		newGrower: func(h *harness) grower { return &vmmReserved{h: h} }},
	{name: "vmm_doubling", desc: "grow.c (2): VMM, VA doubled with the fixed-address hint, remapped when refused",
		newGrower: func(h *harness) grower { return &vmmDoubling{h: h} }},
	{name: "memalloc_doubling", desc: "grow.c (3): cuMemAlloc+copy, doubling capacity, cuMemsetD8 touch per step", needsContext: true,
		newGrower: func(h *harness) grower { return &memallocDoubling{h: h} }},
	{name: "memalloc_exact", desc: "grow.c (4): cuMemAlloc+copy to the exact size every step", needsContext: true,
		newGrower: func(h *harness) grower { return &memallocExact{h: h} }},
}

func findStrategy(name string) (strategy, bool) {
	for _, s := range strategies {
		if s.name == name {
			return s, true
		}
	}
	return strategy{}, false
}

// bufferGrower is the growable buffer of package vmm/buffer: New (its granularity query and
// reservation) in the first step, then one Grow per step; Close tears it down.
type bufferGrower struct {
	h      *harness
	policy buffer.Policy
	buf    *buffer.Buffer
}

func newBufferGrower(h *harness, p buffer.Policy) *bufferGrower {
	return &bufferGrower{h: h, policy: p}
}

func (g *bufferGrower) step(i int) error {
	h := g.h
	if g.buf == nil {
		opts := buffer.Options{Device: h.d.ordinal, Policy: g.policy, Reserve: h.reserve}
		if g.policy == buffer.Geometric {
			opts.MinChunk = h.stepSize
		}
		b, err := buffer.New(vmm.New(h.d.be), 0, opts)
		if err != nil {
			return err
		}
		g.buf = b
	}
	return g.buf.Grow(uint64(i+1) * h.stepSize)
}

func (g *bufferGrower) teardown() error {
	if g.buf == nil {
		return nil
	}
	return g.buf.Close()
}

func (g *bufferGrower) counters() (int, int, int) {
	if g.buf == nil {
		return 0, 0, 0
	}
	st := g.buf.Stats()
	return st.Extends, st.Remaps, 0
}

// vmmReserved is grow.c's strategy (1): the whole address range reserved up front, then per
// step cuMemCreate, cuMemMap and cuMemSetAccess of one step-sized chunk.
type vmmReserved struct {
	h     *harness
	base  cu.DevicePtr
	total uint64 // reserved
	hs    []cu.MemHandle
}

func (g *vmmReserved) step(i int) error {
	h, be, step := g.h, g.h.d.be, g.h.stepSize
	if i == 0 {
		g.total = uint64(h.steps) * step
		base, err := be.Reserve(g.total, 0, 0, 0)
		if err != nil {
			return fmt.Errorf("cuMemAddressReserve %s: %w", units.Size(g.total), err)
		}
		g.base = base
	}
	hd, err := be.Create(step, &h.d.prop, 0)
	if err != nil {
		return fmt.Errorf("cuMemCreate %s: %w", units.Size(step), err)
	}
	g.hs = append(g.hs, hd)
	va := g.base + cu.DevicePtr(uint64(i)*step)
	if err := be.Map(va, step, 0, hd, 0); err != nil {
		return fmt.Errorf("cuMemMap %v+%s: %w", va, units.Size(step), err)
	}
	if err := be.SetAccess(va, step, h.d.access); err != nil {
		return fmt.Errorf("cuMemSetAccess %v+%s: %w", va, units.Size(step), err)
	}
	return nil
}

// teardown is grow.c's: one cuMemUnmap over the whole reservation (the driver accepts a
// range with unmapped parts), the releases, the free.
func (g *vmmReserved) teardown() error {
	if g.base == 0 {
		return nil
	}
	be := g.h.d.be
	var errs []error
	if err := be.Unmap(g.base, g.total); err != nil {
		errs = append(errs, fmt.Errorf("cuMemUnmap: %w", err))
	}
	for _, hd := range g.hs {
		if err := be.Release(hd); err != nil {
			errs = append(errs, fmt.Errorf("cuMemRelease: %w", err))
		}
	}
	if err := be.Free(g.base, g.total); err != nil {
		errs = append(errs, fmt.Errorf("cuMemAddressFree: %w", err))
	}
	g.base, g.hs = 0, nil
	return errors.Join(errs...)
}

func (g *vmmReserved) counters() (int, int, int) { return 0, 0, 0 }

// vmmDoubling is grow.c's strategy (2): when the reservation is full, ask for the range
// right after it with the fixed-address hint (doubling the address space); if the driver
// places it elsewhere, free that, reserve a range twice as large, unmap everything, map every
// chunk again at the new range, set access over it in one call, and free the old ranges.
type vmmDoubling struct {
	h               *harness
	base            cu.DevicePtr
	res, used       uint64
	hs              []cu.MemHandle
	vas             []span
	extends, remaps int
}

type span struct {
	va   cu.DevicePtr
	size uint64
}

func (g *vmmDoubling) step(i int) error {
	h, be, step := g.h, g.h.d.be, g.h.stepSize
	if g.used+step > g.res {
		want := step
		if g.res != 0 {
			want = g.res * 2
		}
		var nb cu.DevicePtr
		ok := false
		if g.res != 0 {
			var err error
			nb, err = be.Reserve(want-g.res, 0, g.base+cu.DevicePtr(g.res), 0)
			if err != nil {
				nb = 0
			}
			ok = err == nil && nb == g.base+cu.DevicePtr(g.res)
		}
		if ok {
			g.vas = append(g.vas, span{nb, want - g.res})
			g.res = want
			g.extends++
		} else {
			if nb != 0 {
				_ = be.Free(nb, want-g.res) // grow.c ignores this result too
			}
			nb, err := be.Reserve(want, 0, 0, 0)
			if err != nil {
				return fmt.Errorf("cuMemAddressReserve %s: %w", units.Size(want), err)
			}
			// The new range joins the ranges teardown frees at once; the old ones leave
			// that list once they are freed.
			old := g.vas
			g.vas = append(old[:len(old):len(old)], span{nb, want})
			if g.used != 0 {
				if err := be.Unmap(g.base, g.used); err != nil {
					return fmt.Errorf("cuMemUnmap %v+%s: %w", g.base, units.Size(g.used), err)
				}
				g.base, g.used = nb, 0
				for j := 0; j < i; j++ {
					va := nb + cu.DevicePtr(uint64(j)*step)
					if err := be.Map(va, step, 0, g.hs[j], 0); err != nil {
						return fmt.Errorf("cuMemMap %v+%s: %w", va, units.Size(step), err)
					}
					g.used += step
				}
				if err := be.SetAccess(nb, g.used, h.d.access); err != nil {
					return fmt.Errorf("cuMemSetAccess %v+%s: %w", nb, units.Size(g.used), err)
				}
			}
			var errs []error
			for _, s := range old {
				if err := be.Free(s.va, s.size); err != nil {
					errs = append(errs, fmt.Errorf("cuMemAddressFree %v+%s: %w", s.va, units.Size(s.size), err))
				}
			}
			g.vas = g.vas[len(old):]
			if err := errors.Join(errs...); err != nil {
				return err
			}
			g.base, g.res = nb, want
			g.remaps++
		}
	}
	hd, err := be.Create(step, &h.d.prop, 0)
	if err != nil {
		return fmt.Errorf("cuMemCreate %s: %w", units.Size(step), err)
	}
	g.hs = append(g.hs, hd)
	va := g.base + cu.DevicePtr(g.used)
	if err := be.Map(va, step, 0, hd, 0); err != nil {
		return fmt.Errorf("cuMemMap %v+%s: %w", va, units.Size(step), err)
	}
	g.used += step
	if err := be.SetAccess(va, step, h.d.access); err != nil {
		return fmt.Errorf("cuMemSetAccess %v+%s: %w", va, units.Size(step), err)
	}
	return nil
}

// teardown is grow.c's: one cuMemUnmap over everything mapped (it may span the extensions),
// the releases, then every reservation freed.
func (g *vmmDoubling) teardown() error {
	be := g.h.d.be
	var errs []error
	if g.used != 0 {
		if err := be.Unmap(g.base, g.used); err != nil {
			errs = append(errs, fmt.Errorf("cuMemUnmap: %w", err))
		}
	}
	for _, hd := range g.hs {
		if err := be.Release(hd); err != nil {
			errs = append(errs, fmt.Errorf("cuMemRelease: %w", err))
		}
	}
	for _, s := range g.vas {
		if err := be.Free(s.va, s.size); err != nil {
			errs = append(errs, fmt.Errorf("cuMemAddressFree: %w", err))
		}
	}
	g.used, g.hs, g.vas = 0, nil, nil
	return errors.Join(errs...)
}

func (g *vmmDoubling) counters() (int, int, int) { return g.extends, g.remaps, 0 }

// memallocDoubling is grow.c's strategy (3): cuMemAlloc with doubling capacity, the used
// bytes copied to the new allocation (cuMemcpyDtoD) and the old one freed when it is full,
// and each step touched with cuMemsetD8.
type memallocDoubling struct {
	h          *harness
	d          cu.DevicePtr
	capa, used uint64
	copies     int
}

func (g *memallocDoubling) step(int) error {
	h, step := g.h, g.h.stepSize
	if g.used+step > g.capa {
		nc := step
		if g.capa != 0 {
			nc = g.capa * 2
		}
		nd, err := h.d.memAlloc(nc)
		if err != nil {
			return err
		}
		if g.used != 0 {
			if err := h.d.copyDtoD(nd, g.d, g.used); err != nil {
				_ = h.d.memFree(nd)
				return err
			}
			g.copies++
		}
		h.probe() // the old and the new allocation are both live: the peak is here
		if g.d != 0 {
			if err := h.d.memFree(g.d); err != nil {
				_ = h.d.memFree(nd)
				return err
			}
		}
		g.d, g.capa = nd, nc
	}
	if err := h.d.memsetD8(g.d+cu.DevicePtr(g.used), 1, step); err != nil {
		return err
	}
	g.used += step
	return nil
}

func (g *memallocDoubling) teardown() error {
	if g.d == 0 {
		return nil
	}
	err := g.h.d.memFree(g.d)
	g.d = 0
	return err
}

func (g *memallocDoubling) counters() (int, int, int) { return 0, 0, g.copies }

// memallocExact is grow.c's strategy (4): every step cuMemAlloc of the new size, a copy of
// the old contents, and a cuMemFree of the old allocation.
type memallocExact struct {
	h      *harness
	d      cu.DevicePtr
	used   uint64
	copies int
}

func (g *memallocExact) step(int) error {
	h, step := g.h, g.h.stepSize
	nd, err := h.d.memAlloc(g.used + step)
	if err != nil {
		return err
	}
	if g.used != 0 {
		if err := h.d.copyDtoD(nd, g.d, g.used); err != nil {
			_ = h.d.memFree(nd)
			return err
		}
		g.copies++
	}
	h.probe() // the old and the new allocation are both live
	if g.d != 0 {
		if err := h.d.memFree(g.d); err != nil {
			_ = h.d.memFree(nd)
			return err
		}
	}
	g.d = nd
	g.used += step
	return nil
}

func (g *memallocExact) teardown() error {
	if g.d == 0 {
		return nil
	}
	err := g.h.d.memFree(g.d)
	g.d = 0
	return err
}

func (g *memallocExact) counters() (int, int, int) { return 0, 0, g.copies }
