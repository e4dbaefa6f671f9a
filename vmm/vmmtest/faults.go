package vmmtest

import (
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// testFaults puts one fault in each call on a known layout: reservations A, B and C of
// 16 MiB, B freed and its range taken by D and E of 8 MiB each; allocations h1 (4 MiB), h2
// and h3 (2 MiB each) mapped at A, A+4 MiB and A+8 MiB with a gap between, and h1 again at C.
// Recorded on an H100 and on an H200, which returned the same for every call.
//
// Its copies read and write memory mapped without access or read-only, so it runs only when
// Dangerous is declared (the recorded driver refused them up front, in the same process as
// the rest).
func testFaults(t *testing.T, e *env) {
	needRecordedGranularity(t, e)
	skipIf(t, !e.caps.Dangerous, "not declared: Capabilities.Dangerous (copies through mappings without access)")
	b := e.b
	s := e.sequence(t, "faults")
	ro := access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READ)
	none := access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_NONE)
	host := cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}

	A := s.mustReserve(16 * mib)
	B := s.mustReserve(16 * mib)
	C := s.mustReserve(16 * mib)
	s.free("B", B, 16*mib)
	D := s.mustReserve(8 * mib)
	E := s.mustReserve(8 * mib)
	s.observe("layout", fmt.Sprintf("%s %s %s", offset("C=B", B, C), offset("D=B", B, D), offset("E=D", D, E)))
	s.observe("layout-B", offset("B=A", A, B))
	prop := e.prop(0)
	h1 := s.mustCreate(4*mib, prop)
	h2 := s.mustCreate(2*mib, prop)
	h3 := s.mustCreate(2*mib, prop)

	// Most maps are undone at once, each unmap a case of its own.
	mapUnmap := func(name string, ptr cu.DevicePtr, size, off uint64, h cu.MemHandle) {
		t.Helper()
		err := b.Map(ptr, size, off, h, 0)
		s.check("map-"+name, err)
		if err == nil {
			s.unmap(name, ptr, size)
		}
	}
	mapUnmap("ok", A, 4*mib, 0, h1)
	mapUnmap("offset-2MiB-size-2MiB", A, 2*mib, 2*mib, h1)
	mapUnmap("offset-2MiB-size-2MiB-at-A-plus-2MiB", A+2*mib, 2*mib, 2*mib, h1)
	mapUnmap("A-plus-64KiB", A+64<<10, 2*mib, 0, h2)
	mapUnmap("size-3MiB", A, 3*mib, 0, h1)
	mapUnmap("size-6MiB", A, 6*mib, 0, h1)
	mapUnmap("size-2MiB", A, 2*mib, 0, h1)
	mapUnmap("B", B, 2*mib, 0, h2) // D has taken B's range
	mapUnmap("past-A-end", A+14*mib, 4*mib, 0, h1)
	mapUnmap("into-C-from-below", C-2*mib, 4*mib, 0, h1)
	mapUnmap("0x10000", 0x10000, 2*mib, 0, h2)
	s.mapping("D-end-into-E", D+6*mib, 4*mib, 0, h1, 0)
	s.setAccess("D-end-into-E", D+6*mib, 4*mib, rw(0))
	s.getAccess("E-plus-1MiB", devLoc(0), E+1*mib)
	s.addressRange("E", E, "D", D)
	s.free("D-while-mapped-into-E", D, 8*mib)
	s.unmap("D-plus-6MiB-2MiB", D+6*mib, 2*mib)
	s.unmap("D-end-into-E", D+6*mib, 4*mib)

	s.mapping("h1-at-A", A, 4*mib, 0, h1, 0)
	s.mapping("h2-at-A-plus-4MiB", A+4*mib, 2*mib, 0, h2, 0)
	s.mapping("h3-at-A-plus-8MiB", A+8*mib, 2*mib, 0, h3, 0)
	s.mapping("h1-alias-at-C", C, 4*mib, 0, h1, 0)
	mapUnmap("overlapping-h1", A+2*mib, 2*mib, 0, h2)
	s.getAccess("A-unset", devLoc(0), A)
	s.getAccess("A-plus-6MiB-unmapped", devLoc(0), A+6*mib)
	s.getAccess("B", devLoc(0), B)
	s.setAccess("none-h1", A, 4*mib, none)
	s.getAccess("h1-after-none", devLoc(0), A)
	s.setAccess("h1-h2-gap-h3", A, 10*mib, rw(0))
	s.setAccess("h1-h2", A, 6*mib, rw(0))
	s.setAccess("none-h2", A+4*mib, 2*mib, none)
	s.getAccess("h2-after-none", devLoc(0), A+4*mib)
	s.setAccess("h3-read-only", A+8*mib, 2*mib, ro)
	s.setAccess("host", A, 4*mib, access(host, 3))
	s.setAccess("host-numa", A, 4*mib, access(cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}, 3))
	s.setAccess("device-negative", A, 4*mib, access(devLoc(-1), 3))
	s.setAccess("device-0-twice", A, 4*mib, []cu.MemAccessDesc{rw(0)[0], ro[0]})
	s.getAccess("after-twice", devLoc(0), A)
	s.setAccess("h1-read-write", A, 4*mib, rw(0))
	s.getAccess("host", host, A)
	s.getAccess("host-7", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST, ID: 7}, A)
	s.getAccess("host-numa", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}, A)
	s.getAccess("host-numa-current", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT}, A)
	s.getAccess("host-h2", host, A+4*mib)
	if e.ndev == 1 {
		s.getAccess("device-1", devLoc(1), A)
	} else {
		t.Log("device 1 exists: the recorded GetAccess for device 1 had none")
	}
	s.getAccess("location-type-9", cu.MemLocation{Type: 9}, A)
	s.getAccess("middle-of-h1", devLoc(0), A+3*mib+5)
	s.getAccess("C-unset", devLoc(0), C)

	buf := make([]byte, 2*mib)
	for i := range buf {
		buf[i] = byte(i*13 + 1)
	}
	got := make([]byte, 2*mib)
	s.check("htod-h3-read-only", b.CopyHtoD(0, A+8*mib, buf))
	s.check("dtoh-h3-read-only", b.CopyDtoH(0, got, A+8*mib))
	s.observe("h3-reads", either(got[0] == 0 && got[len(got)-1] == 0, "zero", "not zero"))
	s.check("memset-h3-read-only", b.MemsetD8(0, A+8*mib, 1, 16))
	s.check("dtod-h3-to-h1", b.CopyDtoD(0, A, A+8*mib, mib))
	s.check("dtod-h1-to-h3", b.CopyDtoD(0, A+8*mib, A, mib))
	s.check("htod-h1-end-into-h2", b.CopyHtoD(0, A+3*mib, buf))
	s.check("dtoh-h2-no-access", b.CopyDtoH(0, got, A+4*mib))
	s.check("htod-h1-end-into-h2-1MiB", b.CopyHtoD(0, A+3*mib+mib/2, buf[:mib]))
	s.check("htod-h1", b.CopyHtoD(0, A+2*mib, buf))
	s.check("dtoh-C-no-access", b.CopyDtoH(0, got, C+2*mib))
	s.setAccess("C-read-only", C, 4*mib, ro)
	s.check("dtoh-C-read-only", b.CopyDtoH(0, got, C+2*mib))
	s.observe("C-sees-h1", either(string(got) == string(buf), "equal", "different"))
	s.check("dtod-C-to-h1-same-memory", b.CopyDtoD(0, A+2*mib, C+2*mib, 2*mib))
	s.check("dtod-from-below-C", b.CopyDtoD(0, A, C-mib, 2*mib))

	s.addressRange("A", A, "A", A)
	s.addressRange("A-plus-3MiB", A+3*mib, "A", A)
	s.addressRange("h2", A+4*mib, "A", A)
	s.addressRange("A-plus-6MiB-unmapped", A+6*mib, "A", A)
	s.addressRange("h3", A+8*mib, "A", A)
	s.addressRange("B", B, "A", A)
	s.addressRange("C-plus-1MiB", C+mib, "C", C)

	rh, err := b.Retain(A + 6*mib)
	s.checkValue("retain-A-plus-6MiB-unmapped", err, fmt.Sprintf("h1=%v h2=%v h3=%v", rh == h1, rh == h2, rh == h3))
	if err == nil {
		_ = b.Release(rh)
	}
	s.check("retain-B", errOf(s.adopt(b.Retain(B))))

	s.unmap("h1-h2-gap", A, 8*mib)
	s.unmap("h2-gap", A+4*mib, 4*mib)
	s.unmap("gap-h3", A+6*mib, 4*mib)
	s.unmap("h1-half-h2", A, 5*mib)
	s.unmap("A", A, 16*mib)
	s.unmap("h1-h2", A, 6*mib)
	s.unmap("h3", A+8*mib, 2*mib)
	s.unmap("C", C, 4*mib)
	s.check("release-h1", b.Release(h1))
	s.check("release-h2", b.Release(h2))
	s.check("release-h3", b.Release(h3))
	s.free("A", A, 16*mib)
	s.free("C", C, 16*mib)
	s.free("D", D, 8*mib)
	s.free("E", E, 8*mib)
	s.free("D-and-E-as-one", D, 16*mib)
}
