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
	if !e.caps.Dangerous {
		t.Skip("not declared: Capabilities.Dangerous (copies through mappings without access)")
	}
	b, c := e.b, e.c
	j := newJanitor(t, b)
	rw := access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READWRITE)
	ro := access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READ)
	none := access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_NONE)
	host := cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}

	A := j.mustReserve(16 * mib)
	B := j.mustReserve(16 * mib)
	C := j.mustReserve(16 * mib)
	c.check(t, "faults/free-B", b.Free(B, 16*mib))
	D := j.mustReserve(8 * mib)
	E := j.mustReserve(8 * mib)
	c.observe(t, "faults/layout", fmt.Sprintf("%s %s %s", offset("C=B", B, C), offset("D=B", B, D), offset("E=D", D, E)), nil)
	c.observe(t, "faults/layout-B", offset("B=A", A, B), nil)
	prop := e.prop(0)
	h1 := j.mustCreate(4*mib, prop)
	h2 := j.mustCreate(2*mib, prop)
	h3 := j.mustCreate(2*mib, prop)

	mp := func(name string, ptr cu.DevicePtr, size, off uint64, h cu.MemHandle, unmap bool) {
		t.Helper()
		err := b.Map(ptr, size, off, h, 0)
		c.check(t, "faults/map-"+name, err)
		if err == nil {
			if unmap {
				c.check(t, "faults/unmap-"+name, b.Unmap(ptr, size))
			} else {
				j.steps = append(j.steps, func() { _ = b.Unmap(ptr, size) })
			}
		}
	}
	mp("ok", A, 4*mib, 0, h1, true)
	mp("offset-2MiB-size-2MiB", A, 2*mib, 2*mib, h1, true)
	mp("offset-2MiB-size-2MiB-at-A-plus-2MiB", A+2*mib, 2*mib, 2*mib, h1, true)
	mp("A-plus-64KiB", A+64<<10, 2*mib, 0, h2, true)
	mp("size-3MiB", A, 3*mib, 0, h1, true)
	mp("size-6MiB", A, 6*mib, 0, h1, true)
	mp("size-2MiB", A, 2*mib, 0, h1, true)
	mp("B", B, 2*mib, 0, h2, true) // D has taken B's range
	mp("past-A-end", A+14*mib, 4*mib, 0, h1, true)
	mp("into-C-from-below", C-2*mib, 4*mib, 0, h1, true)
	mp("0x10000", 0x10000, 2*mib, 0, h2, true)
	mp("D-end-into-E", D+6*mib, 4*mib, 0, h1, false)
	c.check(t, "faults/set-access-D-end-into-E", b.SetAccess(D+6*mib, 4*mib, rw))
	f, err := b.GetAccess(devLoc(0), E+1*mib)
	c.checkValue(t, "faults/get-access-E-plus-1MiB", err, fmt.Sprintf("%d", f))
	ar := func(name string, ptr cu.DevicePtr, refName string, ref cu.DevicePtr) {
		t.Helper()
		base, size, err := b.AddressRange(ptr)
		c.checkValue(t, "faults/address-range-"+name, err, fmt.Sprintf("base=%s size=%d", offset(refName, ref, base), size))
	}
	ar("E", E, "D", D)
	c.check(t, "faults/free-D-while-mapped-into-E", b.Free(D, 8*mib))
	c.check(t, "faults/unmap-D-plus-6MiB-2MiB", b.Unmap(D+6*mib, 2*mib))
	c.check(t, "faults/unmap-D-end-into-E", b.Unmap(D+6*mib, 4*mib))

	mp("h1-at-A", A, 4*mib, 0, h1, false)
	mp("h2-at-A-plus-4MiB", A+4*mib, 2*mib, 0, h2, false)
	mp("h3-at-A-plus-8MiB", A+8*mib, 2*mib, 0, h3, false)
	mp("h1-alias-at-C", C, 4*mib, 0, h1, false)
	mp("overlapping-h1", A+2*mib, 2*mib, 0, h2, true)
	ga := func(name string, loc cu.MemLocation, ptr cu.DevicePtr) {
		t.Helper()
		f, err := b.GetAccess(loc, ptr)
		c.checkValue(t, "faults/get-access-"+name, err, fmt.Sprintf("%d", f))
	}
	sa := func(name string, ptr cu.DevicePtr, size uint64, d []cu.MemAccessDesc) {
		t.Helper()
		c.check(t, "faults/set-access-"+name, b.SetAccess(ptr, size, d))
	}
	ga("A-unset", devLoc(0), A)
	ga("A-plus-6MiB-unmapped", devLoc(0), A+6*mib)
	ga("B", devLoc(0), B)
	sa("none-h1", A, 4*mib, none)
	ga("h1-after-none", devLoc(0), A)
	sa("h1-h2-gap-h3", A, 10*mib, rw)
	sa("h1-h2", A, 6*mib, rw)
	sa("none-h2", A+4*mib, 2*mib, none)
	ga("h2-after-none", devLoc(0), A+4*mib)
	sa("h3-read-only", A+8*mib, 2*mib, ro)
	sa("host", A, 4*mib, access(host, 3))
	sa("host-numa", A, 4*mib, access(cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}, 3))
	sa("device-negative", A, 4*mib, access(devLoc(-1), 3))
	sa("device-0-twice", A, 4*mib, []cu.MemAccessDesc{rw[0], ro[0]})
	ga("after-twice", devLoc(0), A)
	sa("h1-read-write", A, 4*mib, rw)
	ga("host", host, A)
	ga("host-7", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST, ID: 7}, A)
	ga("host-numa", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}, A)
	ga("host-numa-current", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT}, A)
	ga("host-h2", host, A+4*mib)
	if e.ndev == 1 {
		ga("device-1", devLoc(1), A)
	} else {
		t.Log("device 1 exists: the recorded GetAccess for device 1 had none")
	}
	ga("location-type-9", cu.MemLocation{Type: 9}, A)
	ga("middle-of-h1", devLoc(0), A+3*mib+5)
	ga("C-unset", devLoc(0), C)

	buf := make([]byte, 2*mib)
	for i := range buf {
		buf[i] = byte(i*13 + 1)
	}
	got := make([]byte, 2*mib)
	c.check(t, "faults/htod-h3-read-only", b.CopyHtoD(0, A+8*mib, buf))
	c.check(t, "faults/dtoh-h3-read-only", b.CopyDtoH(0, got, A+8*mib))
	c.observe(t, "faults/h3-reads", either(got[0] == 0 && got[len(got)-1] == 0, "zero", "not zero"), nil)
	c.check(t, "faults/memset-h3-read-only", b.MemsetD8(0, A+8*mib, 1, 16))
	c.check(t, "faults/dtod-h3-to-h1", b.CopyDtoD(0, A, A+8*mib, mib))
	c.check(t, "faults/dtod-h1-to-h3", b.CopyDtoD(0, A+8*mib, A, mib))
	c.check(t, "faults/htod-h1-end-into-h2", b.CopyHtoD(0, A+3*mib, buf))
	c.check(t, "faults/dtoh-h2-no-access", b.CopyDtoH(0, got, A+4*mib))
	c.check(t, "faults/htod-h1-end-into-h2-1MiB", b.CopyHtoD(0, A+3*mib+mib/2, buf[:mib]))
	c.check(t, "faults/htod-h1", b.CopyHtoD(0, A+2*mib, buf))
	c.check(t, "faults/dtoh-C-no-access", b.CopyDtoH(0, got, C+2*mib))
	sa("C-read-only", C, 4*mib, ro)
	c.check(t, "faults/dtoh-C-read-only", b.CopyDtoH(0, got, C+2*mib))
	c.observe(t, "faults/C-sees-h1", either(string(got) == string(buf), "equal", "different"), nil)
	c.check(t, "faults/dtod-C-to-h1-same-memory", b.CopyDtoD(0, A+2*mib, C+2*mib, 2*mib))
	c.check(t, "faults/dtod-from-below-C", b.CopyDtoD(0, A, C-mib, 2*mib))

	ar("A", A, "A", A)
	ar("A-plus-3MiB", A+3*mib, "A", A)
	ar("h2", A+4*mib, "A", A)
	ar("A-plus-6MiB-unmapped", A+6*mib, "A", A)
	ar("h3", A+8*mib, "A", A)
	ar("B", B, "A", A)
	ar("C-plus-1MiB", C+mib, "C", C)

	rh, err := b.Retain(A + 6*mib)
	c.checkValue(t, "faults/retain-A-plus-6MiB-unmapped", err, fmt.Sprintf("h1=%v h2=%v h3=%v", rh == h1, rh == h2, rh == h3))
	if err == nil {
		_ = b.Release(rh)
	}
	rb, err := b.Retain(B)
	if err == nil {
		j.adopt(rb)
	}
	c.check(t, "faults/retain-B", err)

	c.check(t, "faults/unmap-h1-h2-gap", b.Unmap(A, 8*mib))
	c.check(t, "faults/unmap-h2-gap", b.Unmap(A+4*mib, 4*mib))
	c.check(t, "faults/unmap-gap-h3", b.Unmap(A+6*mib, 4*mib))
	c.check(t, "faults/unmap-h1-half-h2", b.Unmap(A, 5*mib))
	c.check(t, "faults/unmap-A", b.Unmap(A, 16*mib))
	c.check(t, "faults/unmap-h1-h2", b.Unmap(A, 6*mib))
	c.check(t, "faults/unmap-h3", b.Unmap(A+8*mib, 2*mib))
	c.check(t, "faults/unmap-C", b.Unmap(C, 4*mib))
	c.check(t, "faults/release-h1", b.Release(h1))
	c.check(t, "faults/release-h2", b.Release(h2))
	c.check(t, "faults/release-h3", b.Release(h3))
	c.check(t, "faults/free-A", b.Free(A, 16*mib))
	c.check(t, "faults/free-C", b.Free(C, 16*mib))
	c.check(t, "faults/free-D", b.Free(D, 8*mib))
	c.check(t, "faults/free-E", b.Free(E, 8*mib))
	c.check(t, "faults/free-D-and-E-as-one", b.Free(D, 16*mib))
}
