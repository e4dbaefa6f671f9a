package vmmtest

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// The pointer/ group: what cuPointerGetAttributes reports of VMM memory (Backend.
// PointerAttributes), recorded as facts whose addresses are relative to the reservation and
// mapping a case made, so that runs compare. The multicast-v2/ group: CUDA 13.1's binds,
// which the 13.0 drivers lack, called with a handle that is none (no multicast object is
// made, so it runs everywhere).

// ptrCase is what a pointer case made: the reservation and the mapping the address lies in.
type ptrCase struct {
	resv  cu.DevicePtr
	rsize uint64
	mp    cu.DevicePtr
	msize uint64
}

// describe renders a for the record: ranges as "reservation", "mapping", "none" or an
// offset from the reservation; ids only as set or not.
func (c ptrCase) describe(a cu.PointerAttributes) string {
	rel := func(base cu.DevicePtr, size uint64) string {
		switch {
		case base == 0 && size == 0:
			return "none"
		case base == c.resv && size == c.rsize:
			return "reservation"
		case base == c.mp && size == c.msize && c.mp != 0:
			return "mapping"
		case c.resv != 0:
			return fmt.Sprintf("reservation%+#x/%#x", int64(base-c.resv), size)
		}
		return fmt.Sprintf("other/%#x", size)
	}
	return fmt.Sprintf("type=%v device=%d mapped=%v range=%s mapping=%s handles=%#x rdma=%v access=%v managed=%v legacy-ipc=%v mempool=%s hw-decompress=%v buffer-id=%s block-id=%s refused=%v",
		a.MemoryType, a.DeviceOrdinal, a.Mapped, rel(a.RangeStart, a.RangeSize), rel(a.MappingBase, a.MappingSize),
		uint32(a.HandleTypes), a.GPUDirectRDMA, a.Access, a.Managed, a.LegacyIPC, either(a.Mempool != 0, "set", "0"), a.HWDecompress,
		either(a.BufferID != 0, "set", "0"), either(a.MemoryBlockID != 0, "set", "0"), a.Refused)
}

// query records the attributes of addr, asked from device dev, under name.
func (e *env) query(t *testing.T, name string, dev int, c ptrCase, addr cu.DevicePtr) cu.PointerAttributes {
	t.Helper()
	a, err := e.b.PointerAttributes(dev, addr)
	var fact string
	if err == nil {
		fact = c.describe(a)
	}
	e.c.checkValue(t, name, err, fact)
	return a
}

// mapped creates e.g bytes with prop and maps them at offset e.g of a reservation of 4*e.g,
// with access for device 0 when grant is set.
func (e *env) mapped(j *janitor, prop *cu.MemAllocationProp, size uint64, grant bool) (cu.MemHandle, ptrCase) {
	j.t.Helper()
	h := j.mustCreate(size, prop)
	c := ptrCase{rsize: 4 * size, msize: size}
	c.resv = j.mustReserve(c.rsize)
	c.mp = c.resv + cu.DevicePtr(size)
	j.mustMap(c.mp, size, 0, h)
	if grant {
		noError(j.t, e.b.SetAccess(c.mp, size, rw(0)))
	}
	return h, c
}

// sameIDs says which ids two addresses' attributes share.
func sameIDs(a, b cu.PointerAttributes) string {
	return "buffer-id " + either(a.BufferID == b.BufferID, "same", "differs") +
		", block-id " + either(a.MemoryBlockID == b.MemoryBlockID, "same", "differs")
}

func testPointer(t *testing.T, e *env) {
	t.Run("device-memory", func(t *testing.T) {
		j := newJanitor(t, e.b)
		_, c := e.mapped(j, e.prop(0), e.g, true)
		start := e.query(t, "pointer/vmm-mapping-start", 0, c, c.mp)
		inner := e.query(t, "pointer/vmm-inner-address", 0, c, c.mp+4097)
		e.c.observe(t, "pointer/ids-start-vs-inner", sameIDs(start, inner), nil)
		e.query(t, "pointer/reservation-start-unmapped", 0, c, c.resv)
		e.query(t, "pointer/past-mapping-unmapped", 0, c, c.mp+cu.DevicePtr(e.g))
		noError(t, e.b.SetAccess(c.mp, e.g, access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READ)))
		e.query(t, "pointer/read-only", 0, c, c.mp)
		e.c.check(t, "pointer/bad-device", errOf(e.b.PointerAttributes(e.ndev+5, c.mp)))
	})
	t.Run("no-access", func(t *testing.T) {
		j := newJanitor(t, e.b)
		_, c := e.mapped(j, e.prop(0), e.g, false)
		e.query(t, "pointer/mapped-without-access", 0, c, c.mp)
	})
	t.Run("alias", func(t *testing.T) {
		// One allocation mapped twice: which ids are the allocation's and which the mapping's.
		j := newJanitor(t, e.b)
		h, c := e.mapped(j, e.prop(0), e.g, true)
		second := c.resv + cu.DevicePtr(2*e.g)
		j.mustMap(second, e.g, 0, h)
		noError(t, e.b.SetAccess(second, e.g, rw(0)))
		a, err := e.b.PointerAttributes(0, c.mp)
		noError(t, err)
		b := e.query(t, "pointer/second-mapping", 0, ptrCase{resv: c.resv, rsize: c.rsize, mp: second, msize: e.g}, second)
		e.c.observe(t, "pointer/ids-two-mappings", sameIDs(a, b), nil)
	})
	t.Run("unmapped-after-unmap", func(t *testing.T) {
		j := newJanitor(t, e.b)
		_, c := e.mapped(j, e.prop(0), e.g, true)
		noError(t, e.b.Unmap(c.mp, e.g))
		e.query(t, "pointer/after-unmap", 0, c, c.mp)
	})
	t.Run("unreserved", func(t *testing.T) {
		// Reserve and free a range: nothing is reserved there any more.
		va, err := e.b.Reserve(e.g, 0, 0, 0)
		noError(t, err)
		noError(t, e.b.Free(va, e.g))
		e.query(t, "pointer/freed-reservation", 0, ptrCase{}, va)
	})
	t.Run("posix-fd", func(t *testing.T) {
		skipIf(t, !e.posixFD(), "device 0 has no POSIX file descriptor handles")
		j := newJanitor(t, e.b)
		p := e.prop(0)
		p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
		h, c := e.mapped(j, p, e.g, true)
		e.query(t, "pointer/posix-fd", 0, c, c.mp)
		if runtime.GOOS != "linux" {
			return
		}
		// The same memory imported from its descriptor and mapped again.
		fd, err := e.b.ExportFD(h)
		noError(t, err)
		imp, err := j.adopt(e.b.ImportFD(fd))
		_ = os.NewFile(uintptr(fd), "exported").Close()
		noError(t, err)
		second := c.resv + cu.DevicePtr(2*e.g)
		j.mustMap(second, e.g, 0, imp)
		noError(t, e.b.SetAccess(second, e.g, rw(0)))
		e.query(t, "pointer/posix-fd-imported", 0, ptrCase{resv: c.resv, rsize: c.rsize, mp: second, msize: e.g}, second)
	})
	t.Run("fabric", func(t *testing.T) {
		skipIf(t, !e.caps.Fabric, "no IMEX channel: fabric memory cannot be created")
		j := newJanitor(t, e.b)
		p := e.prop(0)
		p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_FABRIC
		_, c := e.mapped(j, p, e.g, true)
		e.query(t, "pointer/fabric", 0, c, c.mp)
	})
	t.Run("gpudirect-rdma", func(t *testing.T) {
		if v, err := e.b.Attribute(0, cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED); err != nil || v == 0 {
			t.Skipf("device 0 has no GPUDirect RDMA with VMM (%d, %v)", v, err)
		}
		j := newJanitor(t, e.b)
		p := e.prop(0)
		p.GPUDirectRDMACapable = 1
		_, c := e.mapped(j, p, e.g, true)
		e.query(t, "pointer/gpudirect-rdma", 0, c, c.mp)
	})
	t.Run("host-numa", func(t *testing.T) {
		if v, err := e.b.Attribute(0, cu.DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED); err != nil || v == 0 {
			t.Skipf("device 0 has no host NUMA VMM memory (%d, %v)", v, err)
		}
		j := newJanitor(t, e.b)
		p := &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}}
		g, err := e.b.Granularity(p, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
		noError(t, err)
		_, c := e.mapped(j, p, g, true)
		e.query(t, "pointer/host-numa", 0, c, c.mp)
	})
	t.Run("other-device", func(t *testing.T) {
		skipIf(t, e.ndev < 2, "one device")
		if ok, err := e.b.CanAccessPeer(0, 1); err != nil || !ok {
			t.Skipf("device 0 cannot access device 1 (%v)", err)
		}
		j := newJanitor(t, e.b)
		_, c := e.mapped(j, e.prop(1), e.g, true) // device 0 may access memory of device 1
		e.query(t, "pointer/other-device-from-0", 0, c, c.mp)
		e.query(t, "pointer/other-device-from-1", 1, c, c.mp)
	})
}

func testMulticastV2(t *testing.T, e *env) {
	// Handle 0 is no multicast object: a driver with the calls refuses it (cu before the
	// driver sees it), one without them has no symbol to call.
	e.c.check(t, "multicast-v2/bind-mem-no-object", e.b.MulticastBindMemV2(0, 0, 0, 0, 0, e.g, 0))
	e.c.check(t, "multicast-v2/bind-addr-no-object", e.b.MulticastBindAddrV2(0, 0, 0, 0x7f0000000000, e.g, 0))
}
