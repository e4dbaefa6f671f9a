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
	skipIf(t, !e.caps.Dangerous, "not declared: Capabilities.Dangerous (copies through mappings without access)")
	b, n := e.b, e.ndev
	s := e.sequence(t, "walk")
	prop := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: devLoc(0)}

	rv := func(name string, size uint64, hint cu.DevicePtr) cu.DevicePtr {
		t.Helper()
		va, err := s.reserve(size, hint)
		s.checkValue("reserve-"+name, err, placed(va))
		return va
	}
	r1 := rv("r1", 8*mib, 0)
	r2 := rv("r2", 8*mib, 0)
	if a := rv("hint-r1-taken", 8*mib, r1); a != 0 {
		s.free("hint-taken", a, 8*mib)
	}
	if a := rv("hint-r2-plus-16MiB", 8*mib, r2+16*mib); a != 0 {
		s.free("hint-free", a, 8*mib)
	}
	if a := rv("hint-r2-plus-16MiB-64KiB", 8*mib, r2+16*mib+64<<10); a != 0 {
		s.free("hint-misaligned", a, 8*mib)
	}
	s.free("wrong-size", r1, 4*mib)
	s.free("middle", r1+2*mib, 2*mib)
	s.free("middle-to-end", r1+2*mib, 6*mib)
	s.free("two-reservations", r1, 16*mib)
	s.free("size-0", r1, 0)
	s.free("unreserved", 0x1000, 2*mib)
	s.free("r2", r2, 8*mib)
	s.free("r2-again", r2, 8*mib)
	r2 = rv("after-free-r2", 8*mib, 0)

	h1 := s.create("h1", 4*mib, prop, 0)
	h2 := s.create("h2", 2*mib, prop, 0)
	s.mapping("size-0", r1, 0, 0, h1, 0)
	s.mapping("misaligned-ptr", r1+64<<10, 2*mib, 0, h1, 0)
	s.mapping("misaligned-size", r1, 2*mib+64<<10, 0, h1, 0)
	s.mapping("misaligned-offset", r1, 2*mib, 64<<10, h1, 0)
	s.mapping("offset-plus-size-past-allocation", r1, 4*mib, 2*mib, h1, 0)
	s.mapping("size-past-allocation", r1, 6*mib, 0, h1, 0)
	s.mapping("past-reservation-end", r1+6*mib, 4*mib, 0, h1, 0)
	s.mapping("spanning-two-reservations", r2-2*mib, 4*mib, 0, h1, 0)
	s.mapping("unreserved", 0x10000000, 2*mib, 0, h1, 0)
	s.mapping("flags-1", r1, 4*mib, 0, h1, 1)
	s.mapping("partial-of-handle", r1+6*mib, 2*mib, 2*mib, h1, 0)
	s.unmap("partial-handle-mapping", r1+6*mib, 2*mib)
	s.mapping("h1-at-r1", r1, 4*mib, 0, h1, 0)
	s.mapping("over-existing-same", r1, 4*mib, 0, h1, 0)
	s.mapping("overlapping", r1+2*mib, 4*mib, 0, h1, 0)
	s.mapping("over-existing-other-handle", r1, 2*mib, 0, h2, 0)
	s.mapping("h2-at-r1-plus-4MiB", r1+4*mib, 2*mib, 0, h2, 0)
	s.mapping("h1-alias-at-r2", r2, 4*mib, 0, h1, 0)

	host := cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}
	s.getAccess("unset", devLoc(0), r1)
	s.getAccess("r1-plus-6MiB", devLoc(0), r1+6*mib)
	s.getAccess("unreserved", devLoc(0), 0x1000)
	s.setAccess("empty", r1, 4*mib, nil)
	s.setAccess("size-0", r1, 0, rw(0))
	s.setAccess("r1-plus-6MiB-2MiB", r1+6*mib, 2*mib, rw(0))
	s.setAccess("r1-plus-4MiB-4MiB", r1+4*mib, 4*mib, rw(0))
	s.setAccess("misaligned-size", r1, 64<<10, rw(0))
	s.setAccess("device-ordinal-count", r1, 4*mib, access(devLoc(n), 3))
	s.setAccess("host", r1, 4*mib, access(host, 3))
	s.setAccess("location-invalid", r1, 4*mib, access(cu.MemLocation{}, 3))
	s.setAccess("flags-2", r1, 4*mib, access(devLoc(0), 2))
	s.setAccess("flags-7", r1, 4*mib, access(devLoc(0), 7))
	s.setAccess("two-descriptors-second-bad", r1, 4*mib, []cu.MemAccessDesc{{Location: devLoc(0), Flags: 3}, {Location: devLoc(n), Flags: 3}})
	s.getAccess("after-failed", devLoc(0), r1)
	s.setAccess("first-2MiB-of-h1", r1, 2*mib, rw(0))
	s.getAccess("r1-after-partial", devLoc(0), r1)
	s.getAccess("r1-plus-2MiB-after-partial", devLoc(0), r1+2*mib)
	s.setAccess("read-only", r1, 4*mib, access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READ))
	s.getAccess("read-only", devLoc(0), r1+3*mib)
	s.setAccess("spanning-h1-h2", r1, 6*mib, rw(0))
	s.getAccess("read-write-middle", devLoc(0), r1+5*mib+7)
	s.getAccess("host", host, r1)
	s.getAccess("device-ordinal-count", devLoc(n), r1)
	s.getAccess("location-invalid", cu.MemLocation{}, r1)
	s.getAccess("r2", devLoc(0), r2)
	s.setAccess("none-r2-4MiB", r2, 4*mib, access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_NONE))
	s.getAccess("r2-after-none", devLoc(0), r2)

	s.addressRange("r1", r1, "r1", r1)
	s.addressRange("r1-plus-3MiB", r1+3*mib, "r1", r1)
	s.addressRange("r1-plus-4MiB", r1+4*mib, "r1", r1)
	s.addressRange("r1-plus-7MiB", r1+7*mib, "r1", r1)
	s.addressRange("unreserved", 0x1000, "r1", r1)
	s.addressRange("r2", r2, "r1", r1)

	buf := make([]byte, 3*mib)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	s.check("htod-spanning-h1-h2", b.CopyHtoD(0, r1+3*mib, buf))
	got := make([]byte, len(buf))
	s.check("dtoh-spanning-h1-h2", b.CopyDtoH(0, got, r1+3*mib))
	s.observe("bytes-read-back", either(string(got) == string(buf), "equal", "different"))
	got1 := make([]byte, mib)
	s.check("dtoh-r2-plus-3MiB", b.CopyDtoH(0, got1, r2+3*mib))
	s.check("htod-r2-plus-3MiB", b.CopyHtoD(0, r2+3*mib, got1))
	s.setAccess("r2-read-only", r2, 4*mib, access(devLoc(0), cu.MEM_ACCESS_FLAGS_PROT_READ))
	s.check("dtoh-r2-plus-3MiB-after-read-only", b.CopyDtoH(0, got1, r2+3*mib))
	s.observe("bytes-at-r2-plus-3MiB", either(string(got1) == string(buf[:mib]), "equal", "different"))
	s.check("htod-r2-plus-3MiB-after-read-only", b.CopyHtoD(0, r2+3*mib, got1))
	s.check("dtod-r1-to-r2", b.CopyDtoD(0, r2, r1, mib))
	s.check("dtod-r2-to-r1", b.CopyDtoD(0, r1, r2, mib))
	s.check("htod-past-h2", b.CopyHtoD(0, r1+5*mib, buf[:2*mib]))
	s.check("htod-r1-plus-6MiB", b.CopyHtoD(0, r1+6*mib, buf[:16]))
	s.check("htod-unreserved", b.CopyHtoD(0, 0x1000, buf[:16]))
	s.check("htod-device-ordinal-count", b.CopyHtoD(n, r1, buf[:16]))
	s.check("htod-empty", b.CopyHtoD(0, r1, nil))
	s.check("dtod-6MiB", b.CopyDtoD(0, r1, r1+mib, 6*mib))
	s.check("dtod-overlapping", b.CopyDtoD(0, r1+1, r1, mib))
	s.check("dtod-size-0", b.CopyDtoD(0, r1, r1, 0))
	s.check("memset", b.MemsetD8(0, r1, 0xab, 100))
	s.check("memset-past-h2", b.MemsetD8(0, r1+5*mib, 0xab, 2*mib))
	s.check("memset-r1-plus-6MiB", b.MemsetD8(0, r1+6*mib, 0xab, 2))
	s.check("memset-r2", b.MemsetD8(0, r2, 0xab, 2))
	s.check("memset-size-0", b.MemsetD8(0, r1, 0xab, 0))

	rh, err := b.Retain(r1 + 3*mib)
	s.checkValue("retain-middle-of-h1", err, fmt.Sprintf("same=%v", rh == h1))
	if err == nil {
		s.check("release-retained", b.Release(rh))
	}
	// The recorded sequence kept this reference to its end.
	s.check("retain-r1-plus-7MiB", errOf(s.adopt(b.Retain(r1+7*mib))))
	s.check("retain-unreserved", errOf(b.Retain(0x1000)))

	if runtime.GOOS == "linux" && e.posixFD() {
		walkShare(t, e, s, h1, prop)
	} else {
		t.Log("the recorded exports and imports of POSIX file descriptors need Linux and a device with them")
	}

	s.free("r2-while-mapped", r2, 8*mib)
	s.unmap("size-0", r1, 0)
	s.unmap("first-2MiB-of-h1", r1, 2*mib)
	s.unmap("second-2MiB-of-h1", r1+2*mib, 2*mib)
	s.unmap("misaligned", r1, 64<<10)
	s.unmap("r2", r2, 8*mib)
	s.unmap("r1-plus-6MiB", r1+6*mib, 2*mib)
	s.unmap("unreserved", 0x10000000, 2*mib)
	s.check("release-h1-while-mapped", b.Release(h1))
	s.check("dtoh-after-release", b.CopyDtoH(0, got1, r1+3*mib))
	s.observe("bytes-after-release", either(string(got1) == string(buf[:mib]), "equal", "different"))
	rh, err = b.Retain(r1)
	s.checkValue("retain-after-release", err, fmt.Sprintf("same=%v", rh == h1))
	if err == nil {
		s.check("release-re-retained", b.Release(rh))
	}
	s.unmap("h1-and-h2", r1, 6*mib)
	s.check("release-h2-unmapped", b.Release(h2))
	s.unmap("r2-4MiB", r2, 4*mib)
	s.unmap("r2-4MiB-again", r2, 4*mib)
	s.free("r1-at-end", r1, 8*mib)
	s.free("r2-at-end", r2, 8*mib)
}

// walkShare is the walk's exports and imports: h1 was created without a shareable handle type.
func walkShare(t *testing.T, e *env, s *sequence, h1 cu.MemHandle, prop cu.MemAllocationProp) {
	b := e.b
	s.check("export-fd-not-requested", errOf(b.ExportFD(h1)))
	s.check("export-fabric-not-requested", errOf(b.ExportFabric(h1)))
	s.check("export-win32", errOf(b.ExportWin32(h1, cu.MEM_HANDLE_TYPE_WIN32)))
	q := prop
	q.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	hx, err := s.adopt(b.Create(2*mib, &q, 0))
	s.check("create-posix-fd", err)
	if err == nil {
		fd, err := b.ExportFD(hx)
		s.check("export-fd", err)
		if err == nil {
			hi, err := s.adopt(b.ImportFD(fd))
			s.checkValue("import-fd-own", err, fmt.Sprintf("same=%v", hi == hx))
			if err == nil {
				pr, err := b.Properties(hi)
				s.checkValue("properties-imported", err, propString(pr))
				s.check("release-imported", b.Release(hi))
			}
			_ = os.NewFile(uintptr(fd), "exported").Close()
			s.check("import-fd-closed", s.releaseNow(b.ImportFD(fd)))
		}
		s.check("export-fabric-posix-fd-only", errOf(b.ExportFabric(hx)))
		s.check("release-posix-fd", b.Release(hx))
	}
	f, err := os.CreateTemp("", "vmmtest")
	noError(t, err)
	defer os.Remove(f.Name())
	defer f.Close()
	noError(t, f.Truncate(2*mib))
	s.check("import-fd-temporary-file", s.releaseNow(b.ImportFD(int(f.Fd()))))
	s.check("import-fd-1000", s.releaseNow(b.ImportFD(1000)))
	if e.caps.Fabric {
		t.Log("the zero fabric handle was recorded without an IMEX channel")
		return
	}
	s.check("import-fabric-zero", s.releaseNow(b.ImportFabric(cu.MemFabricHandle{})))
}
