package vmmtest

import (
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// testSweep asks every query, and creates and reserves, with one argument wrong at a time;
// nothing it makes outlives it. Recorded on an H100 (the H200 has not run it). The values
// device 0 reported (driver version, device count, name, memory, compute capability, the
// attributes below) are the machine's identity, not the driver's rules: they are checked on
// sim's H100 preset (sim's TestPresets), and here only the results.
func testSweep(t *testing.T, e *env) {
	needRecordedGranularity(t, e)
	n := e.ndev
	s := e.sequence(t, "sweep")
	s.check("device-ordinal-count", errOf(e.b.Device(n)))
	s.check("device-ordinal-negative", errOf(e.b.Device(-1)))
	for _, a := range []struct {
		name string
		attr cu.DeviceAttribute
	}{
		{"vmm", cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
		{"fabric", cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED},
		{"multicast", cu.DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED},
		{"posix-fd", cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED},
		{"compression", cu.DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED},
		{"host-vmm", cu.DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
		{"host-numa-vmm", cu.DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
		{"gpudirect-rdma-with-vmm", cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED},
	} {
		s.check("attribute-"+a.name, errOf(e.b.Attribute(0, a.attr)))
	}
	s.check("attribute-ordinal-count", errOf(e.b.Attribute(n, cu.DEVICE_ATTRIBUTE_WARP_SIZE)))
	s.check("attribute-100000", errOf(e.b.Attribute(0, cu.DeviceAttribute(100000))))
	s.check("attribute-0", errOf(e.b.Attribute(0, cu.DeviceAttribute(0))))
	ok, err := e.b.CanAccessPeer(0, 0)
	s.checkValue("can-access-peer-self", err, fmt.Sprint(ok))
	s.check("can-access-peer-ordinal-count", errOf(e.b.CanAccessPeer(0, n)))
	for a := cu.P2PAttribute(1); a <= 6; a++ {
		v, err := e.b.P2PAttribute(a, 0, 0)
		s.checkValue(fmt.Sprintf("p2p-attribute-%d-self", a), err, fmt.Sprint(v))
	}

	prop := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: devLoc(0)}
	gr := func(name string, p cu.MemAllocationProp, o cu.MemAllocationGranularityFlags) {
		t.Helper()
		g, err := e.b.Granularity(&p, o)
		s.checkValue("granularity-"+name, err, sizeName(g))
	}
	gr("min", prop, 0)
	gr("recommended", prop, 1)
	gr("option-2", prop, 2)
	s.check("granularity-nil", errOf(e.b.Granularity(nil, 0)))
	type variant struct {
		name string
		p    cu.MemAllocationProp
	}
	with := func(mod func(q *cu.MemAllocationProp)) cu.MemAllocationProp {
		q := prop
		mod(&q)
		return q
	}
	at := func(l cu.MemLocation) cu.MemAllocationProp {
		return with(func(q *cu.MemAllocationProp) { q.Location = l })
	}
	// One field wrong at a time, asked both for a granularity and to create.
	wrong := []variant{
		{"managed", with(func(q *cu.MemAllocationProp) { q.Type = cu.MEM_ALLOCATION_TYPE_MANAGED })},
		{"invalid-type", with(func(q *cu.MemAllocationProp) { q.Type = 0 })},
		{"device-ordinal-count", at(devLoc(n))},
		{"device-negative", at(devLoc(-1))},
		{"location-invalid", at(cu.MemLocation{})},
		{"host", at(cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST})},
		{"host-numa", at(cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA})},
		{"host-numa-current", at(cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT})},
	}
	for _, w := range wrong {
		gr(w.name, w.p, 0)
		if w.name == "host" {
			gr("host-recommended", w.p, 1)
		}
	}
	handles := func(ht cu.MemHandleType) cu.MemAllocationProp {
		return with(func(q *cu.MemAllocationProp) { q.RequestedHandleTypes = ht })
	}
	gr("handle-type-fabric", handles(cu.MEM_HANDLE_TYPE_FABRIC), 0)
	gr("handle-type-posix-fd", handles(cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), 0)
	gr("handle-type-0x10", handles(0x10), 0)

	// Multicast granularity was recorded on a device without multicast.
	mcp := cu.MulticastObjectProp{NumDevices: 1, Size: 2 * mib}
	mc, err := e.b.Attribute(0, cu.DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED)
	noError(t, err)
	if mc == 0 {
		g, err := e.b.MulticastGranularity(&mcp, 0)
		s.checkValue("multicast-granularity-min", err, sizeName(g))
		g, err = e.b.MulticastGranularity(&mcp, 1)
		s.checkValue("multicast-granularity-recommended", err, sizeName(g))
	}
	s.check("multicast-granularity-nil", errOf(e.b.MulticastGranularity(nil, 0)))
	if mc == 0 {
		mcp.NumDevices = 0
		s.check("multicast-granularity-no-devices", errOf(e.b.MulticastGranularity(&mcp, 0)))
	} else {
		t.Log("device 0 has multicast: the multicast granularity sweep was recorded without")
	}

	s.create("size-0", 0, prop, 0)
	s.create("size-1", 1, prop, 0)
	s.create("size-64KiB", 64<<10, prop, 0)
	s.create("size-2MiB-plus-64KiB", 2*mib+64<<10, prop, 0)
	s.create("flags-1", 2*mib, prop, 1)
	for _, w := range wrong {
		s.create(w.name, 2*mib, w.p, 0)
	}
	for _, ht := range []cu.MemHandleType{1, 2, 4, 8, 9, 0x10} {
		if ht&cu.MEM_HANDLE_TYPE_FABRIC != 0 && e.caps.Fabric {
			t.Logf("handle type %#x: recorded without an IMEX channel", uint32(ht))
			continue
		}
		s.create(fmt.Sprintf("handle-type-%#x", uint32(ht)), 2*mib, handles(ht), 0)
	}
	for _, v := range []variant{
		{"compression-generic", with(func(q *cu.MemAllocationProp) { q.CompressionType = cu.MEM_ALLOCATION_COMP_GENERIC })},
		{"compression-2", with(func(q *cu.MemAllocationProp) { q.CompressionType = 2 })},
		{"gpudirect-rdma-1", with(func(q *cu.MemAllocationProp) { q.GPUDirectRDMACapable = 1 })},
		{"gpudirect-rdma-2", with(func(q *cu.MemAllocationProp) { q.GPUDirectRDMACapable = 2 })},
		{"usage-1", with(func(q *cu.MemAllocationProp) { q.Usage = 1 })},
		{"usage-4", with(func(q *cu.MemAllocationProp) { q.Usage = 4 })},
		{"reserved-bytes", with(func(q *cu.MemAllocationProp) { q.Reserved[0] = 1 })},
	} {
		s.create(v.name, 2*mib, v.p, 0)
	}
	s.create("1TiB", 1<<40, prop, 0)
	s.releaseAll()

	rv := func(name string, size, align uint64, hint cu.DevicePtr, flags uint64) {
		t.Helper()
		va, err := e.b.Reserve(size, align, hint, flags)
		s.checkValue("reserve-"+name, err, placed(va))
		if err == nil {
			s.free(name, va, size)
		}
	}
	rv("size-0", 0, 0, 0, 0)
	rv("size-1", 1, 0, 0, 0)
	rv("size-64KiB", 64<<10, 0, 0, 0)
	rv("size-2MiB-plus-64KiB", 2*mib+64<<10, 0, 0, 0)
	rv("align-3", 2*mib, 3, 0, 0)
	rv("align-64KiB", 2*mib, 64<<10, 0, 0)
	rv("align-6MiB", 6*mib, 6*mib, 0, 0)
	rv("align-1GiB", 2*mib, 1<<30, 0, 0)
	rv("flags-1", 2*mib, 0, 0, 1)
	for _, sz := range []uint64{1 << 40, 64 << 40, 128 << 40, 256 << 40, 1 << 50} {
		rv(fmt.Sprintf("%dTiB", sz>>40), sz, 0, 0, 0)
	}
}
