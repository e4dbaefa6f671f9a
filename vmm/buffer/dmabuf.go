package buffer

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// ExportDmaBuf exports the buffer's committed memory, every chunk of it, as one dma-buf
// descriptor (cuMemGetHandleForAddressRange), for an RDMA NIC to register
// (ibv_reg_dmabuf_mr): the whole of [Base, Base+Stats.Committed), not only the first chunk,
// which is all a registration that takes its extent from cuMemGetAddressRange gets. See
// ExportDmaBufRange for the rules and what a later Grow or Shrink does to it.
func (b *Buffer) ExportDmaBuf(opts ...vmm.DmaBufOption) (*vmm.DmaBuf, error) {
	if b == nil {
		return nil, opErr("export dma-buf", "", errNoBuffer)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable(); err != nil {
		return nil, opErr("export dma-buf", "", err)
	}
	if b.committed == 0 {
		return nil, opErr("export dma-buf", "", fmt.Errorf("%w: nothing is committed", vmm.ErrInvalid))
	}
	return b.exportDmaBuf(0, b.committed, opts)
}

// ExportDmaBufRange exports the n bytes at offset off of the buffer's committed memory as
// one dma-buf descriptor, whose Generation is the buffer's (Generation). The rules of the
// driver are checked first (vmm.ErrMisaligned: off and n must be multiples of the host page
// size; vmm.ErrUnsupported: compressible and host-located memory do not export). Grow and
// Shrink wait for the export.
//
// The descriptor describes the memory behind the range when it was made. After a Grow
// that moved the buffer (Stats.Remaps), or a Shrink that released memory of the range, it
// describes memory the buffer no longer has there: Stale says so, and a new export is
// needed (what a NIC registered through the old one is still the old memory).
func (b *Buffer) ExportDmaBufRange(off, n uint64, opts ...vmm.DmaBufOption) (*vmm.DmaBuf, error) {
	args := fmt.Sprintf("%s at offset %d", units.Size(n), off)
	if b == nil {
		return nil, opErr("export dma-buf", args, errNoBuffer)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable(); err != nil {
		return nil, opErr("export dma-buf", args, err)
	}
	return b.exportDmaBuf(off, n, opts)
}

// exportDmaBuf exports [off, off+n); the caller holds b.mu.
func (b *Buffer) exportDmaBuf(off, n uint64, opts []vmm.DmaBufOption) (*vmm.DmaBuf, error) {
	args := fmt.Sprintf("%s at offset %d", units.Size(n), off)
	if off > b.committed || n > b.committed-off {
		return nil, opErr("export dma-buf", args, fmt.Errorf("%w: %s committed", vmm.ErrOutOfRange, units.Size(b.committed)))
	}
	if err := b.changeable(); err != nil {
		return nil, opErr("export dma-buf", args, err)
	}
	base := b.base()
	var chunks []vmm.DmaBufChunk
	for i, a := range b.allocs() {
		ch := b.chunks[i]
		if ch.off+ch.size <= off || ch.off >= off+n {
			continue
		}
		p, err := a.Properties()
		if err != nil {
			return nil, opErr("export dma-buf", args, err)
		}
		chunks = append(chunks, vmm.DmaBufChunk{Addr: base + cu.DevicePtr(ch.off), Size: ch.size, Props: p, Alloc: a})
	}
	d, err := b.m.ExportDmaBufChunks(base+cu.DevicePtr(off), n, chunks, opts...)
	if err != nil {
		// A rule the checks caught (each matches vmm.ErrInvalid or vmm.ErrUnsupported) says
		// what is wrong; a refusal of the driver's may be the reservations'.
		ruled := errors.Is(err, vmm.ErrInvalid) || errors.Is(err, vmm.ErrUnsupported)
		if k := len(segments(b.spans, off, off+n)); k > 1 && !ruled {
			err = errors.Join(err, fmt.Errorf("the range spans %d reservations (the buffer grew in place past its first): the driver may take no dma-buf across them", k))
		}
		return nil, opErr("export dma-buf", args, err)
	}
	d.Generation = b.gen
	return d, nil
}

// Generation counts the changes after which a dma-buf exported earlier may describe
// memory the buffer no longer has where it was: a Grow that moved the buffer (a remap) and
// a Shrink that released chunks. Each export carries the generation it was made in
// (vmm.DmaBuf.Generation).
func (b *Buffer) Generation() uint64 {
	return read(b, func() uint64 { return b.gen })
}

// Stale reports whether d, a dma-buf exported from b, describes memory b no longer has at
// d's addresses: b moved since (a Grow that remapped it), released memory of d's range (a
// Shrink; memory committed there again later is other memory), or was closed. A descriptor
// that is not stale still describes the buffer's memory: Grows that did not move it and
// Shrinks past its range leave it so. A nil d is stale.
func (b *Buffer) Stale(d *vmm.DmaBuf) bool {
	if b == nil || d == nil {
		return true
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.usable() != nil || d.Generation < b.movedAt {
		return true
	}
	base := b.base()
	if d.Addr < base || d.Size > b.committed || uint64(d.Addr-base) > b.committed-d.Size {
		return true
	}
	off := uint64(d.Addr - base)
	for _, ch := range b.chunks {
		if ch.off+ch.size > off && ch.off < off+d.Size && ch.born > d.Generation {
			return true
		}
	}
	return false
}
