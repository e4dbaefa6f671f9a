package vmmtest

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// testWalk is one sequence over two adjacent 8 MiB reservations r1 and r2 and two
// allocations, h1 (4 MiB) and h2 (2 MiB): hints and frees, then maps, access changes, copies,
// retains, exports and unmaps, each wrong in one way, in an order where every call finds what
// the earlier ones left. An early map that runs past r1's end into r2 stays mapped (without
// access) to the end, so several later calls meet it. Recorded on an H100 (the H200 has not
// run it) without a current context, so its AddressRange cases are not recorded.
//
// Its copies read and write memory mapped without access, so it runs only when Dangerous is
// declared (the recorded driver refused them all up front, in the same process as the rest).
func testWalk(t *testing.T, e *env) {
	needRecordedGranularity(t, e)
	if !e.caps.Dangerous {
		t.Skip("not declared: Capabilities.Dangerous (copies through mappings without access)")
	}
	b, c, n := e.b, e.c, e.ndev
	j := newJanitor(t, b)
	prop := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: devLoc(0)}

	rv := func(name string, size uint64, hint cu.DevicePtr) cu.DevicePtr {
		t.Helper()
		va, err := j.reserve(size, 0, hint)
		c.checkValue(t, "walk/reserve-"+name, err, placed(va))
		return va
	}
	fr := func(name string, va cu.DevicePtr, size uint64) {
		t.Helper()
		c.check(t, "walk/free-"+name, b.Free(va, size))
	}
	r1 := rv("r1", 8*mib, 0)
	r2 := rv("r2", 8*mib, 0)
	if a := rv("hint-r1-taken", 8*mib, r1); a != 0 {
		fr("hint-taken", a, 8*mib)
	}
	if a := rv("hint-r2-plus-16MiB", 8*mib, r2+16*mib); a != 0 {
		fr("hint-free", a, 8*mib)
	}
	if a := rv("hint-r2-plus-16MiB-64KiB", 8*mib, r2+16*mib+64<<10); a != 0 {
		fr("hint-misaligned", a, 8*mib)
	}
	fr("wrong-size", r1, 4*mib)
	fr("middle", r1+2*mib, 2*mib)
	fr("middle-to-end", r1+2*mib, 6*mib)
	fr("two-reservations", r1, 16*mib)
	fr("size-0", r1, 0)
	fr("unreserved", 0x1000, 2*mib)
	fr("r2", r2, 8*mib)
	fr("r2-again", r2, 8*mib)
	r2 = rv("after-free-r2", 8*mib, 0)

	cr := &creator{e: e, j: j, group: "walk"}
	h1 := cr.create(t, "h1", 4*mib, prop, 0)
	h2 := cr.create(t, "h2", 2*mib, prop, 0)
	mp := func(name string, ptr cu.DevicePtr, size, off uint64, h cu.MemHandle, flags uint64) {
		t.Helper()
		err := b.Map(ptr, size, off, h, flags)
		if err == nil {
			j.steps = append(j.steps, func() { _ = b.Unmap(ptr, size) })
		}
		c.check(t, "walk/map-"+name, err)
	}
	um := func(name string, ptr cu.DevicePtr, size uint64) {
		t.Helper()
		c.check(t, "walk/unmap-"+name, b.Unmap(ptr, size))
	}
	mp("size-0", r1, 0, 0, h1, 0)
	mp("misaligned-ptr", r1+64<<10, 2*mib, 0, h1, 0)
	mp("misaligned-size", r1, 2*mib+64<<10, 0, h1, 0)
	mp("misaligned-offset", r1, 2*mib, 64<<10, h1, 0)
	mp("offset-plus-size-past-allocation", r1, 4*mib, 2*mib, h1, 0)
	mp("size-past-allocation", r1, 6*mib, 0, h1, 0)
	mp("past-reservation-end", r1+6*mib, 4*mib, 0, h1, 0)
	mp("spanning-two-reservations", r2-2*mib, 4*mib, 0, h1, 0)
	mp("unreserved", 0x10000000, 2*mib, 0, h1, 0)
	mp("flags-1", r1, 4*mib, 0, h1, 1)
	mp("partial-of-handle", r1+6*mib, 2*mib, 2*mib, h1, 0)
	um("partial-handle-mapping", r1+6*mib, 2*mib)
	mp("h1-at-r1", r1, 4*mib, 0, h1, 0)
	mp("over-existing-same", r1, 4*mib, 0, h1, 0)
	mp("overlapping", r1+2*mib, 4*mib, 0, h1, 0)
	mp("over-existing-other-handle", r1, 2*mib, 0, h2, 0)
	mp("h2-at-r1-plus-4MiB", r1+4*mib, 2*mib, 0, h2, 0)
	mp("h1-alias-at-r2", r2, 4*mib, 0, h1, 0)

	ga := func(name string, loc cu.MemLocation, ptr cu.DevicePtr) {
		t.Helper()
		f, err := b.GetAccess(loc, ptr)
		c.checkValue(t, "walk/get-access-"+name, err, fmt.Sprintf("%d", f))
	}
	sa := func(name string, ptr cu.DevicePtr, size uint64, d []cu.MemAccessDesc) {
		t.Helper()
		c.check(t, "walk/set-access-"+name, b.SetAccess(ptr, size, d))
	}
	rw := access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READWRITE)
	host := cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}
	ga("unset", devLoc(0), r1)
	ga("r1-plus-6MiB", devLoc(0), r1+6*mib)
	ga("unreserved", devLoc(0), 0x1000)
	sa("empty", r1, 4*mib, nil)
	sa("size-0", r1, 0, rw)
	sa("r1-plus-6MiB-2MiB", r1+6*mib, 2*mib, rw)
	sa("r1-plus-4MiB-4MiB", r1+4*mib, 4*mib, rw)
	sa("misaligned-size", r1, 64<<10, rw)
	sa("device-ordinal-count", r1, 4*mib, access(devLoc(n), 3))
	sa("host", r1, 4*mib, access(host, 3))
	sa("location-invalid", r1, 4*mib, access(cu.MemLocation{}, 3))
	sa("flags-2", r1, 4*mib, access(devLoc(0), 2))
	sa("flags-7", r1, 4*mib, access(devLoc(0), 7))
	sa("two-descriptors-second-bad", r1, 4*mib, []cu.MemAccessDesc{{Location: devLoc(0), Flags: 3}, {Location: devLoc(n), Flags: 3}})
	ga("after-failed", devLoc(0), r1)
	sa("first-2MiB-of-h1", r1, 2*mib, rw)
	ga("r1-after-partial", devLoc(0), r1)
	ga("r1-plus-2MiB-after-partial", devLoc(0), r1+2*mib)
	sa("read-only", r1, 4*mib, access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READ))
	ga("read-only", devLoc(0), r1+3*mib)
	sa("spanning-h1-h2", r1, 6*mib, rw)
	ga("read-write-middle", devLoc(0), r1+5*mib+7)
	ga("host", host, r1)
	ga("device-ordinal-count", devLoc(n), r1)
	ga("location-invalid", cu.MemLocation{}, r1)
	ga("r2", devLoc(0), r2)
	sa("none-r2-4MiB", r2, 4*mib, access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_NONE))
	ga("r2-after-none", devLoc(0), r2)

	ar := func(name string, ptr cu.DevicePtr) {
		t.Helper()
		base, size, err := b.AddressRange(ptr)
		c.checkValue(t, "walk/address-range-"+name, err, fmt.Sprintf("base=%s size=%d", offset("r1", r1, base), size))
	}
	ar("r1", r1)
	ar("r1-plus-3MiB", r1+3*mib)
	ar("r1-plus-4MiB", r1+4*mib)
	ar("r1-plus-7MiB", r1+7*mib)
	ar("unreserved", 0x1000)
	ar("r2", r2)

	buf := make([]byte, 3*mib)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	c.check(t, "walk/htod-spanning-h1-h2", b.CopyHtoD(0, r1+3*mib, buf))
	got := make([]byte, len(buf))
	c.check(t, "walk/dtoh-spanning-h1-h2", b.CopyDtoH(0, got, r1+3*mib))
	c.observe(t, "walk/bytes-read-back", either(string(got) == string(buf), "equal", "different"), nil)
	got1 := make([]byte, mib)
	c.check(t, "walk/dtoh-r2-plus-3MiB", b.CopyDtoH(0, got1, r2+3*mib))
	c.check(t, "walk/htod-r2-plus-3MiB", b.CopyHtoD(0, r2+3*mib, got1))
	sa("r2-read-only", r2, 4*mib, access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READ))
	c.check(t, "walk/dtoh-r2-plus-3MiB-after-read-only", b.CopyDtoH(0, got1, r2+3*mib))
	c.observe(t, "walk/bytes-at-r2-plus-3MiB", either(string(got1) == string(buf[:mib]), "equal", "different"), nil)
	c.check(t, "walk/htod-r2-plus-3MiB-after-read-only", b.CopyHtoD(0, r2+3*mib, got1))
	c.check(t, "walk/dtod-r1-to-r2", b.CopyDtoD(0, r2, r1, mib))
	c.check(t, "walk/dtod-r2-to-r1", b.CopyDtoD(0, r1, r2, mib))
	c.check(t, "walk/htod-past-h2", b.CopyHtoD(0, r1+5*mib, buf[:2*mib]))
	c.check(t, "walk/htod-r1-plus-6MiB", b.CopyHtoD(0, r1+6*mib, buf[:16]))
	c.check(t, "walk/htod-unreserved", b.CopyHtoD(0, 0x1000, buf[:16]))
	c.check(t, "walk/htod-device-ordinal-count", b.CopyHtoD(n, r1, buf[:16]))
	c.check(t, "walk/htod-empty", b.CopyHtoD(0, r1, nil))
	c.check(t, "walk/dtod-6MiB", b.CopyDtoD(0, r1, r1+mib, 6*mib))
	c.check(t, "walk/dtod-overlapping", b.CopyDtoD(0, r1+1, r1, mib))
	c.check(t, "walk/dtod-size-0", b.CopyDtoD(0, r1, r1, 0))
	c.check(t, "walk/memset", b.MemsetD8(0, r1, 0xab, 100))
	c.check(t, "walk/memset-past-h2", b.MemsetD8(0, r1+5*mib, 0xab, 2*mib))
	c.check(t, "walk/memset-r1-plus-6MiB", b.MemsetD8(0, r1+6*mib, 0xab, 2))
	c.check(t, "walk/memset-r2", b.MemsetD8(0, r2, 0xab, 2))
	c.check(t, "walk/memset-size-0", b.MemsetD8(0, r1, 0xab, 0))

	rh, err := b.Retain(r1 + 3*mib)
	c.checkValue(t, "walk/retain-middle-of-h1", err, fmt.Sprintf("same=%v", rh == h1))
	if err == nil {
		c.check(t, "walk/release-retained", b.Release(rh))
	}
	rh, err = b.Retain(r1 + 7*mib)
	if err == nil {
		j.adopt(rh) // the recorded sequence kept this reference to its end
	}
	c.check(t, "walk/retain-r1-plus-7MiB", err)
	_, err = b.Retain(0x1000)
	c.check(t, "walk/retain-unreserved", err)

	if runtime.GOOS == "linux" && e.posixFD() {
		walkShare(t, e, j, h1, prop)
	} else {
		t.Log("the recorded exports and imports of POSIX file descriptors need Linux and a device with them")
	}

	fr("r2-while-mapped", r2, 8*mib)
	um("size-0", r1, 0)
	um("first-2MiB-of-h1", r1, 2*mib)
	um("second-2MiB-of-h1", r1+2*mib, 2*mib)
	um("misaligned", r1, 64<<10)
	um("r2", r2, 8*mib)
	um("r1-plus-6MiB", r1+6*mib, 2*mib)
	um("unreserved", 0x10000000, 2*mib)
	c.check(t, "walk/release-h1-while-mapped", b.Release(h1))
	c.check(t, "walk/dtoh-after-release", b.CopyDtoH(0, got1, r1+3*mib))
	c.observe(t, "walk/bytes-after-release", either(string(got1) == string(buf[:mib]), "equal", "different"), nil)
	rh, err = b.Retain(r1)
	c.checkValue(t, "walk/retain-after-release", err, fmt.Sprintf("same=%v", rh == h1))
	if err == nil {
		c.check(t, "walk/release-re-retained", b.Release(rh))
	}
	um("h1-and-h2", r1, 6*mib)
	c.check(t, "walk/release-h2-unmapped", b.Release(h2))
	um("r2-4MiB", r2, 4*mib)
	um("r2-4MiB-again", r2, 4*mib)
	fr("r1-at-end", r1, 8*mib)
	fr("r2-at-end", r2, 8*mib)
}

// walkShare is the walk's exports and imports: h1 was created without a shareable handle type.
func walkShare(t *testing.T, e *env, j *janitor, h1 cu.MemHandle, prop cu.MemAllocationProp) {
	b, c := e.b, e.c
	_, err := b.ExportFD(h1)
	c.check(t, "walk/export-fd-not-requested", err)
	_, err = b.ExportFabric(h1)
	c.check(t, "walk/export-fabric-not-requested", err)
	_, err = b.ExportWin32(h1, cu.MEM_HANDLE_TYPE_WIN32)
	c.check(t, "walk/export-win32", err)
	q := prop
	q.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	hx, err := b.Create(2*mib, &q, 0)
	c.check(t, "walk/create-posix-fd", err)
	if err == nil {
		j.adopt(hx)
		fd, err := b.ExportFD(hx)
		c.check(t, "walk/export-fd", err)
		if err == nil {
			hi, err := b.ImportFD(fd)
			c.checkValue(t, "walk/import-fd-own", err, fmt.Sprintf("same=%v", hi == hx))
			if err == nil {
				j.adopt(hi)
				pr, err := b.Properties(hi)
				c.checkValue(t, "walk/properties-imported", err, propString(pr))
				c.check(t, "walk/release-imported", b.Release(hi))
			}
			_ = os.NewFile(uintptr(fd), "exported").Close()
			hc, err := b.ImportFD(fd)
			if err == nil {
				_ = b.Release(hc)
			}
			c.check(t, "walk/import-fd-closed", err)
		}
		_, err = b.ExportFabric(hx)
		c.check(t, "walk/export-fabric-posix-fd-only", err)
		c.check(t, "walk/release-posix-fd", b.Release(hx))
	}
	f, err := os.CreateTemp("", "vmmtest")
	noError(t, err)
	defer os.Remove(f.Name())
	defer f.Close()
	noError(t, f.Truncate(2*mib))
	ht, err := b.ImportFD(int(f.Fd()))
	if err == nil {
		_ = b.Release(ht)
	}
	c.check(t, "walk/import-fd-temporary-file", err)
	h1000, err := b.ImportFD(1000)
	if err == nil {
		_ = b.Release(h1000)
	}
	c.check(t, "walk/import-fd-1000", err)
	if e.caps.Fabric {
		t.Log("the zero fabric handle was recorded without an IMEX channel")
		return
	}
	hz, err := b.ImportFabric(cu.MemFabricHandle{})
	if err == nil {
		_ = b.Release(hz)
	}
	c.check(t, "walk/import-fabric-zero", err)
}
