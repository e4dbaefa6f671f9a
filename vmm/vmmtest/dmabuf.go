package vmmtest

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// The dmabuf group: cuMemGetHandleForAddressRange with MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
// the descriptor an RDMA NIC registers device memory through (ibv_reg_dmabuf_mr). One case
// for each rule of the header (cuda.h 13.0: the range aligned to the host page size, mapped
// whole, by allocations of one device with identical properties; the PCIe mapping flag),
// the failing ones included, and what becomes of a descriptor when the memory behind it is
// unmapped. Sizes in observed values are in granules of device 0 and host pages (see granules).

// dmaBufCase exports [va, va+size) with flags, checks the result as name, and returns the
// descriptor (-1 on failure), closed at the end of the test.
func (e *env) dmaBuf(t *testing.T, name string, va cu.DevicePtr, size, flags uint64) (int, error) {
	t.Helper()
	fd, err := e.b.ExportDmaBuf(va, size, flags)
	e.c.check(t, "dmabuf/"+name, err)
	if err != nil {
		return -1, err
	}
	if fd < 0 {
		t.Fatalf("dmabuf/%s: ExportDmaBuf returned descriptor %d and no error", name, fd)
	}
	t.Cleanup(func() { closeDescriptor(fd) })
	return fd, nil
}

// dmaBufSize observes the size a dma-buf descriptor reports (lseek to its end) as name.
func (e *env) dmaBufSize(t *testing.T, name string, fd int) {
	t.Helper()
	n, err := descriptorSize(fd)
	if err != nil {
		e.c.observe(t, "dmabuf/"+name, "GO_ERROR: "+err.Error(), err)
		return
	}
	e.c.observe(t, "dmabuf/"+name, "CUDA_SUCCESS: size "+e.granules(uint64(n)), nil)
}

// granules writes n in granules of device 0 and host pages: "3g", "1p", "1g-1p" (as the
// recording's machine and sim's presets share the granularity, while the host page size is
// the host's), or in bytes when it is neither.
func (e *env) granules(n uint64) string {
	if n%e.g == 0 {
		return strconv.FormatUint(n/e.g, 10) + "g"
	}
	page := uint64(os.Getpagesize())
	if n%page != 0 || e.g%page != 0 {
		return strconv.FormatUint(n, 10) + " bytes"
	}
	per := e.g / page
	q, r := n/e.g, n%e.g/page
	switch {
	case r > per/2:
		return strconv.FormatUint(q+1, 10) + "g-" + strconv.FormatUint(per-r, 10) + "p"
	case q == 0:
		return strconv.FormatUint(r, 10) + "p"
	}
	return strconv.FormatUint(q, 10) + "g+" + strconv.FormatUint(r, 10) + "p"
}

// attr reads a device attribute, false when it cannot be read.
func (e *env) attr(dev int, a cu.DeviceAttribute) bool {
	v, err := e.b.Attribute(dev, a)
	return err == nil && v != 0
}

// mustChunks maps one allocation of e.g bytes per prop, one after another from va, each
// with read-write access for its own device; the janitor undoes it all.
func (e *env) mustChunks(j *janitor, va cu.DevicePtr, props ...*cu.MemAllocationProp) {
	j.t.Helper()
	for i, p := range props {
		at := va + cu.DevicePtr(uint64(i)*e.g)
		h := j.mustCreate(e.g, p)
		j.mustMap(at, e.g, 0, h)
		noError(j.t, e.b.SetAccess(at, e.g, rw(int(p.Location.ID))))
	}
}

func testDmaBuf(t *testing.T, e *env) {
	needLinux(t)
	v, err := e.b.Attribute(0, cu.DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
	e.c.checkValue(t, "dmabuf/attribute", err, strconv.Itoa(v))
	if err != nil || v == 0 {
		t.Skipf("device 0 does not support dma-buf (%d, %v)", v, err)
	}
	page := uint64(os.Getpagesize())
	t.Logf("host page size %d, granularity %d", page, e.g)
	before := dmaBufDescriptors(t)

	t.Run("one-chunk", func(t *testing.T) {
		j := newJanitor(t, e.b)
		_, va := j.mustBuffer(e.g, e.prop(0))
		if fd, err := e.dmaBuf(t, "one-chunk", va, e.g, 0); err == nil {
			e.dmaBufSize(t, "one-chunk-size", fd)
			if fd2, err := e.dmaBuf(t, "twice", va, e.g, 0); err == nil && fd2 == fd {
				t.Fatalf("two exports returned the same descriptor %d", fd)
			}
		}
		e.dmaBuf(t, "pcie", va, e.g, cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)
		e.dmaBuf(t, "unknown-flag", va, e.g, 2)
		e.dmaBuf(t, "size-zero", va, 0, 0)
		e.dmaBuf(t, "misaligned-address", va+1, page, 0)
		e.dmaBuf(t, "misaligned-size", va, page+1, 0)
		if fd, err := e.dmaBuf(t, "one-page", va, page, 0); err == nil {
			e.dmaBufSize(t, "one-page-size", fd)
		}
		if page < e.g {
			if fd, err := e.dmaBuf(t, "page-offset", va+cu.DevicePtr(page), e.g-page, 0); err == nil {
				e.dmaBufSize(t, "page-offset-size", fd)
			}
		}
	})

	t.Run("multi-chunk", func(t *testing.T) {
		j := newJanitor(t, e.b)
		va := j.mustReserve(3 * e.g)
		e.mustChunks(j, va, e.prop(0), e.prop(0), e.prop(0))
		if fd, err := e.dmaBuf(t, "multi-chunk", va, 3*e.g, 0); err == nil {
			e.dmaBufSize(t, "multi-chunk-size", fd)
		}
		// The extent other projects took for the buffer: one mapping's.
		base, size, err := e.b.AddressRange(va + cu.DevicePtr(e.g) + 12345)
		if err != nil {
			e.c.check(t, "dmabuf/multi-chunk-address-range", err)
		} else {
			e.c.observe(t, "dmabuf/multi-chunk-address-range", fmt.Sprintf("CUDA_SUCCESS: base +%s, size %s", e.granules(uint64(base-va)), e.granules(size)), nil)
		}
		e.dmaBuf(t, "first-chunk-only", va, e.g, 0)
		e.dmaBuf(t, "middle-chunk", va+cu.DevicePtr(e.g), e.g, 0)
		e.dmaBuf(t, "across-chunk-boundary", va+cu.DevicePtr(e.g-page), 2*page, 0)
		e.dmaBuf(t, "multi-chunk-pcie", va, 3*e.g, cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)
	})

	t.Run("holes", func(t *testing.T) {
		j := newJanitor(t, e.b)
		va := j.mustReserve(3 * e.g)
		e.mustChunks(j, va, e.prop(0))
		e.mustChunks(j, va+cu.DevicePtr(2*e.g), e.prop(0))
		e.dmaBuf(t, "hole", va, 3*e.g, 0)
		e.dmaBuf(t, "hole-only", va+cu.DevicePtr(e.g), e.g, 0)
		e.dmaBuf(t, "past-mapping-end", va, 2*e.g, 0)

		r := j.mustReserve(e.g)
		e.mustChunks(j, r, e.prop(0))
		e.dmaBuf(t, "past-reservation-end", r, 2*e.g, 0)

		empty := j.mustReserve(e.g)
		e.dmaBuf(t, "unmapped-reservation", empty, e.g, 0)

		freed, err := e.b.Reserve(e.g, 0, 0, 0)
		noError(t, err)
		noError(t, e.b.Free(freed, e.g))
		e.dmaBuf(t, "freed-reservation", freed, e.g, 0)

		na := j.mustMapping(j.mustCreate(e.g, e.prop(0)), e.g)
		e.dmaBuf(t, "no-access", na, e.g, 0)
	})

	t.Run("properties", func(t *testing.T) {
		if e.attr(0, cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) {
			j := newJanitor(t, e.b)
			rdma := e.prop(0)
			rdma.GPUDirectRDMACapable = 1
			va := j.mustReserve(2 * e.g)
			e.mustChunks(j, va, rdma, e.prop(0))
			e.dmaBuf(t, "gpudirect-rdma", va, e.g, 0)
			e.dmaBuf(t, "gpudirect-rdma-and-not", va, 2*e.g, 0)
		} else {
			t.Log("device 0 has no GPUDirect RDMA with VMM")
		}
		if e.attr(0, cu.DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED) {
			j := newJanitor(t, e.b)
			comp := e.prop(0)
			comp.CompressionType = cu.MEM_ALLOCATION_COMP_GENERIC
			h := j.mustCreate(e.g, comp)
			got, err := e.b.Properties(h)
			noError(t, err)
			if got.CompressionType != cu.MEM_ALLOCATION_COMP_GENERIC {
				t.Logf("the driver made compressible memory uncompressible (%+v): the compression cases do not apply", got)
			} else {
				va := j.mustReserve(2 * e.g)
				j.mustMap(va, e.g, 0, h)
				noError(t, e.b.SetAccess(va, e.g, rw(0)))
				e.mustChunks(j, va+cu.DevicePtr(e.g), e.prop(0))
				e.dmaBuf(t, "compressible", va, e.g, 0)
				e.dmaBuf(t, "compressible-and-not", va, 2*e.g, 0)
			}
		}
		if e.posixFD() {
			j := newJanitor(t, e.b)
			shareable := e.prop(0)
			shareable.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
			va := j.mustReserve(2 * e.g)
			e.mustChunks(j, va, shareable, e.prop(0))
			e.dmaBuf(t, "posix-fd-handle-type", va, e.g, 0)
			e.dmaBuf(t, "handle-types-differ", va, 2*e.g, 0)
		}
		if e.attr(0, cu.DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) {
			j := newJanitor(t, e.b)
			host := e.prop(0)
			host.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}
			g, err := e.b.Granularity(host, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
			noError(t, err)
			_, va := j.mustBuffer(g, host)
			e.dmaBuf(t, "host-memory", va, g, 0)
		}
	})

	t.Run("devices", func(t *testing.T) {
		skipIf(t, e.ndev < 2, "one device")
		j := newJanitor(t, e.b)
		one := j.mustReserve(e.g)
		e.mustChunks(j, one, e.prop(1))
		e.dmaBuf(t, "device-1", one, e.g, 0)
		va := j.mustReserve(2 * e.g)
		e.mustChunks(j, va, e.prop(0), e.prop(1))
		e.dmaBuf(t, "two-devices", va, 2*e.g, 0)
	})

	t.Run("across-reservations", func(t *testing.T) {
		j := newJanitor(t, e.b)
		a := j.mustReserve(e.g)
		b, err := j.reserve(e.g, a+cu.DevicePtr(e.g))
		noError(t, err)
		if b != a+cu.DevicePtr(e.g) {
			t.Skipf("the driver placed the second reservation at %v, not after the first (%v)", b, a)
		}
		e.mustChunks(j, a, e.prop(0))
		e.mustChunks(j, b, e.prop(0))
		e.dmaBuf(t, "across-reservations", a, 2*e.g, 0)
	})

	// What a descriptor is once the memory it was exported from is unmapped and released,
	// and once other memory is mapped in its place (the header: "retrieve a new handle every
	// time the underlying physical allocation(s) ... are changed").
	t.Run("unmap", func(t *testing.T) {
		j := newJanitor(t, e.b)
		va := j.mustReserve(2 * e.g)
		h1 := j.mustCreate(e.g, e.prop(0))
		h2 := j.mustCreate(e.g, e.prop(0))
		noError(t, e.b.Map(va, e.g, 0, h1, 0))
		noError(t, e.b.Map(va+cu.DevicePtr(e.g), e.g, 0, h2, 0))
		noError(t, e.b.SetAccess(va, 2*e.g, rw(0)))
		fd, err := e.dmaBuf(t, "before-unmap", va, 2*e.g, 0)
		noError(t, e.b.Unmap(va, 2*e.g))
		noError(t, e.b.Release(h1))
		noError(t, e.b.Release(h2))
		if err == nil {
			e.dmaBufSize(t, "after-unmap-size", fd)
		}
		e.dmaBuf(t, "export-after-unmap", va, 2*e.g, 0)
		e.mustChunks(j, va, e.prop(0), e.prop(0))
		e.dmaBuf(t, "after-remap", va, 2*e.g, 0)
		if err == nil {
			e.dmaBufSize(t, "after-remap-old-size", fd)
		}
	})

	t.Run("imported", func(t *testing.T) {
		skipIf(t, !e.posixFD(), "device 0 has no POSIX file descriptor handles")
		j := newJanitor(t, e.b)
		p := e.prop(0)
		p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
		h := j.mustCreate(e.g, p)
		shared := j.mustExportFD(h)
		imp, err := j.adopt(e.b.ImportFD(shared))
		noError(t, err)
		va := j.mustMapping(imp, e.g)
		noError(t, e.b.SetAccess(va, e.g, rw(0)))
		fd, err := e.dmaBuf(t, "imported", va, e.g, 0)
		if err != nil {
			return
		}
		// A dma-buf is not an allocation's shareable handle.
		e.c.check(t, "dmabuf/import-dma-buf-as-allocation", errOf(j.adopt(e.b.ImportFD(fd))))
	})

	if after := dmaBufDescriptors(t); len(after) != len(before) {
		t.Errorf("dma-buf descriptors leaked: %v open before the group, %v after", before, after)
	}
}
