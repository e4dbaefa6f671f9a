package sparse

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// ExportDmaBuf exports the n bytes at offset off of the array as one dma-buf descriptor
// (cuMemGetHandleForAddressRange), for an RDMA NIC to register: every page of the range,
// each its own allocation. Every page the range touches must be committed: the first that
// is not fails the export with vmm.ErrHole, naming it (CommittedRanges lists what can be
// exported). off and n must be multiples of the host page size (vmm.ErrMisaligned). Commit
// and Decommit wait for the export.
//
// The descriptor describes the pages committed when it was made: after a Decommit of one
// of them it describes memory the array no longer has there.
func (a *Array) ExportDmaBuf(off, n uint64, opts ...vmm.DmaBufOption) (*vmm.DmaBuf, error) {
	args := fmt.Sprintf("%#x+%s", off, units.Size(n))
	if a == nil {
		return nil, opErr("export dma-buf", args, errNoArray)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if err := a.usable(); err != nil {
		return nil, opErr("export dma-buf", args, err)
	}
	first, last, err := a.check(off, n)
	if err == nil && a.g.Asleep() {
		err = fmt.Errorf("%w: the array's pages sleep", vmm.ErrAsleep)
	}
	if err != nil {
		return nil, opErr("export dma-buf", args, err)
	}
	base := a.g.Base()
	var chunks []vmm.DmaBufChunk
	for _, c := range a.g.Chunks(first*a.page, (last+1-first)*a.page) {
		p, err := c.Alloc.Properties()
		if err != nil {
			return nil, opErr("export dma-buf", args, err)
		}
		chunks = append(chunks, vmm.DmaBufChunk{Addr: base + cu.DevicePtr(c.Off), Size: a.page, Props: p, Alloc: c.Alloc})
	}
	d, err := a.m.ExportDmaBufChunks(base+cu.DevicePtr(off), n, chunks, opts...)
	if err != nil {
		if gaps := a.pagesIn(first, last+1, false); len(gaps) > 0 && errors.Is(err, vmm.ErrHole) {
			err = fmt.Errorf("%w: page %d (offset %#x of the array) is not committed", vmm.ErrHole, gaps[0], gaps[0]*a.page)
		}
		return nil, opErr("export dma-buf", args, err)
	}
	return d, nil
}
