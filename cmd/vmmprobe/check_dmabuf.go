package main

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// dmaBufChunks is how many allocations the dma-buf check maps one after another: more
// than one, since a descriptor that covers only the first chunk is the mistake RDMA
// libraries made (docs/rdma.md).
const dmaBufChunks = 2

// dmaBuf maps dmaBufChunks allocations of device memory one after another, exports the
// whole range as one dma-buf (what an RDMA NIC registers), checks that the descriptor's
// size is the range's, and closes it. The memory is GPUDirect RDMA capable where the device
// can make it so, as memory for a NIC is (NCCL makes it so).
func (c *checker) dmaBuf(d deviceInfo) {
	dev := d.Index
	claimed := d.DmaBuf && runtime.GOOS == "linux"
	if !claimed {
		r := checkResult{Check: "dma-buf", Device: intp(dev), Status: statusUnsupported}
		if runtime.GOOS != "linux" {
			r.Detail = "dma-buf descriptors are Linux only"
		} else {
			r.Detail = "the device does not export dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)"
		}
		c.add(r)
		return
	}
	sz := size(d)
	p := vmm.DeviceProps(dev)
	p.GPUDirectRDMA = d.GPUDirectRDMAWithVMM
	detail, stage, err := c.exportDmaBuf(p, sz)
	r := result("dma-buf", dev, err, claimed, detail)
	if err != nil {
		r.Detail = stage + " failed"
	}
	c.add(r)
}

// errDmaBufSize is a descriptor whose size is not the range exported.
var errDmaBufSize = errors.New("the descriptor's size is not the range's")

// exportDmaBuf runs the dma-buf check's steps; on failure it returns the step that failed.
func (c *checker) exportDmaBuf(p vmm.Props, sz uint64) (detail, stage string, err error) {
	dev := int(p.Location.ID)
	total := dmaBufChunks * sz
	r, err := c.m.Reserve(total)
	if err != nil {
		return "", "reserve", err
	}
	var mems []*vmm.Allocation
	defer func() {
		cerr := r.Close()
		for _, m := range mems {
			cerr = errors.Join(cerr, m.Close())
		}
		if cerr != nil && err == nil {
			stage, err = "teardown", cerr
		}
	}()
	for i := range dmaBufChunks {
		m, err := c.m.Create(sz, p)
		if err != nil {
			return "", "create", err
		}
		mems = append(mems, m)
		if _, err := r.Map(uint64(i)*sz, m); err != nil {
			return "", "map", err
		}
	}
	if err := r.SetAccess(0, total, vmm.ReadWrite(dev)...); err != nil {
		return "", "set-access", err
	}
	buf, err := r.ExportDmaBuf(0, total)
	if err != nil {
		return "", "export", err
	}
	n, kind, derr := describeDescriptor(buf.FD())
	if cerr := buf.Close(); cerr != nil {
		return "", "close", cerr
	}
	if derr != nil {
		return "", "size", derr
	}
	if uint64(n) != total {
		return "", "size", fmt.Errorf("%w: %d bytes, the range %s", errDmaBufSize, n, units.Size(total))
	}
	what := ""
	if p.GPUDirectRDMA {
		what = " GPUDirect RDMA capable"
	}
	return fmt.Sprintf("exported %d%s chunks of %s mapped one after another as one dma-buf of %s (its size, by lseek, %s; %s); closed",
		buf.Chunks, what, units.Size(sz), units.Size(total), units.Size(uint64(n)), kind), "", nil
}

// dmaBufFix is the remedy of the dma-buf check.
func dmaBufFix(r checkResult) fix {
	if r.Status == statusUnsupported {
		return fix{do: "dma-buf export needs Linux, a device and driver that support it (CUDA 11.7+ with NVIDIA's open GPU kernel modules) " +
			"and a kernel with dma-buf support; without it, RDMA NICs register GPU memory through the nvidia_peermem module and GPUDirect RDMA capable memory"}
	}
	return fix{do: "the device says it supports dma-buf but the export of a range of two chunks failed: update the driver; " +
		"if it persists, report it with the output of vmmprobe check -o json"}
}
