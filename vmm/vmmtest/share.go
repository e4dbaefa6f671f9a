package vmmtest

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

func testShare(t *testing.T, e *env) {
	needLinux(t)
	skipIf(t, !e.posixFD(), "device 0 has no POSIX file descriptor handles")
	j := newJanitor(t, e.b)
	p := e.prop(0)
	p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	h, va := j.mustBuffer(e.g, p)
	want := j.mustWrite(va, 7, int(e.g))

	fd, err := e.b.ExportFD(h)
	e.c.check(t, "share/export-fd", err)
	noError(t, err)
	if fd < 0 {
		t.Fatalf("ExportFD returned descriptor %d and no error", fd)
	}
	f := os.NewFile(uintptr(fd), "exported")
	defer f.Close()

	imp, err := j.adopt(e.b.ImportFD(fd))
	e.c.check(t, "share/import-fd-same-process", err)
	noError(t, err)
	t.Logf("imported handle equals the original: %v", imp == h)
	got, err := e.b.Properties(imp)
	noError(t, err)
	equal(t, p.Location, got.Location)
	iva := j.mustMapping(imp, e.g)
	noError(t, e.b.SetAccess(iva, e.g, rw(0)))
	requireBytes(t, e.b, 0, iva, want)

	// Release every reference but the mapping; the data stays.
	e.c.check(t, "share/release-imported", e.b.Release(imp))
	requireBytes(t, e.b, 0, iva, want)

	// Which file an exported descriptor is open on: what tells two exports apart is behind
	// the open file, or its file; a second allocation's export and a second export of the
	// first say which.
	second := j.mustCreate(e.g, p)
	fd2 := j.mustExportFD(second)
	fd3 := j.mustExportFD(h)
	var files [3]string
	for i, d := range []int{fd, fd2, fd3} {
		files[i], err = fileOf(d)
		noError(t, err)
	}
	switch {
	case files[0] == files[1] && files[0] == files[2]:
		e.c.observe(t, "share/export-fd-file", "CUDA_SUCCESS: one file for every export", nil)
	case files[0] == files[2]:
		e.c.observe(t, "share/export-fd-file", "CUDA_SUCCESS: a file per allocation", nil)
	default:
		e.c.observe(t, "share/export-fd-file", "CUDA_SUCCESS: a file per export", nil)
	}

	// An export outlives the exporter's handle and mapping: the descriptor still imports
	// the allocation, bytes and all.
	lone, lva := j.mustBuffer(e.g, p)
	lonely := j.mustWrite(lva, 9, int(e.g))
	lfd := j.mustExportFD(lone)
	noError(t, e.b.Unmap(lva, e.g))
	noError(t, e.b.Release(lone))
	again, err := j.adopt(e.b.ImportFD(lfd))
	e.c.check(t, "share/import-after-release", err)
	if err == nil {
		j.mustMap(lva, e.g, 0, again)
		noError(t, e.b.SetAccess(lva, e.g, rw(0)))
		requireBytes(t, e.b, 0, lva, lonely)
	}

	// Errors.
	plain := j.mustCreate(e.g, e.prop(0))
	e.c.check(t, "share/export-fd-not-requested", errOf(e.b.ExportFD(plain)))
	e.c.check(t, "share/export-fabric-not-requested", errOf(e.b.ExportFabric(plain)))
	e.c.check(t, "share/import-negative-fd", errOf(e.b.ImportFD(-1)))
	closed, err := os.Open(os.DevNull)
	noError(t, err)
	cfd := int(closed.Fd())
	noError(t, closed.Close())
	e.c.check(t, "share/import-closed-fd", errOf(e.b.ImportFD(cfd)))
	devnull, err := os.Open(os.DevNull)
	noError(t, err)
	defer devnull.Close()
	e.c.check(t, "share/import-non-cuda-fd", errOf(j.adopt(e.b.ImportFD(int(devnull.Fd())))))
	e.c.check(t, "share/export-win32-on-linux", errOf(e.b.ExportWin32(h, cu.MEM_HANDLE_TYPE_WIN32)))
}

// testFabric records what the driver does with fabric handles: creating, exporting and
// importing them (in this process and in a child), what else such an allocation can be
// exported as, and handles it never made.
func testFabric(t *testing.T, e *env) {
	v, err := e.b.Attribute(0, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)
	noError(t, err)
	skipIf(t, v == 0, "device 0 has no fabric handle support")
	j := newJanitor(t, e.b)
	p := e.prop(0)
	p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_FABRIC
	h, err := j.create(e.g, p)
	if !e.caps.Fabric {
		// The attribute says yes; without an IMEX channel the driver says no.
		e.c.check(t, "fabric/create-without-imex", err)
		return
	}
	e.c.check(t, "fabric/create", err)
	noError(t, err)
	va := j.mustReserve(2 * e.g)
	j.mustMap(va, e.g, 0, h)
	noError(t, e.b.SetAccess(va, e.g, rw(0)))
	want := j.mustWrite(va, 11, int(e.g))

	fh, err := e.b.ExportFabric(h)
	e.c.check(t, "fabric/export", err)
	noError(t, err)
	notEqual(t, cu.MemFabricHandle{}, fh)
	again, err := e.b.ExportFabric(h)
	e.c.checkValue(t, "fabric/export-twice", err, either(again == fh, "the same handle", "another handle"))
	e.c.check(t, "fabric/export-fd-not-requested", errOf(e.b.ExportFD(h)))

	imp, err := j.adopt(e.b.ImportFabric(fh))
	e.c.checkValue(t, "fabric/import-same-process", err, either(imp == h, "the same allocation handle", "another allocation handle"))
	noError(t, err)
	j.mustMap(va+cu.DevicePtr(e.g), e.g, 0, imp)
	noError(t, e.b.SetAccess(va+cu.DevicePtr(e.g), e.g, rw(0)))
	requireBytes(t, e.b, 0, va+cu.DevicePtr(e.g), want)

	made := fh
	made[len(made)-1] ^= 0xff
	e.c.check(t, "fabric/import-one-byte-changed", errOf(j.adopt(e.b.ImportFabric(made))))
	e.c.check(t, "fabric/import-made-up", errOf(e.b.ImportFabric(cu.MemFabricHandle{1, 2, 3})))

	// Exported, then released before anyone imported it.
	gone, err := e.b.Create(e.g, p, 0)
	noError(t, err)
	gfh, err := e.b.ExportFabric(gone)
	noError(t, e.b.Release(gone))
	noError(t, err)
	e.c.check(t, "fabric/import-after-release", errOf(j.adopt(e.b.ImportFabric(gfh))))

	both := *p
	both.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_FABRIC | cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	bh, err := j.create(e.g, &both)
	e.c.check(t, "fabric/create-with-posix-fd", err)
	if err == nil && runtime.GOOS == "linux" {
		fd, err := e.b.ExportFD(bh)
		e.c.check(t, "fabric/export-fd-of-both", err)
		if err == nil {
			_ = os.NewFile(uintptr(fd), "exported").Close()
		}
		e.c.check(t, "fabric/export-fabric-of-both", errOf(e.b.ExportFabric(bh)))
	}
	t.Run("child", func(t *testing.T) {
		skipIf(t, !e.caps.CrossProcess, "not declared: Capabilities.CrossProcess")
		e.c.check(t, "fabric/import-in-child", sendToChild(t, e, va, e.g, 11, fh[:], nil))
	})
}

// testPeer checks peer access for every ordered pair of devices (the recorded rules are
// the same for each pair).
func testPeer(t *testing.T, e *env) {
	skipIf(t, e.ndev < 2, "one device")
	for a := range e.ndev {
		for b := range e.ndev {
			if a != b {
				t.Run(fmt.Sprintf("%d-%d", a, b), func(t *testing.T) { testPeerPair(t, e, a, b) })
			}
		}
	}
}

// testPeerPair: memory of device a, mapped for a and b, written from b and read by both;
// memory of b filled by a's copy; read-only access for a.
func testPeerPair(t *testing.T, e *env, a, b int) {
	ok, err := e.b.CanAccessPeer(a, b)
	noError(t, err)
	rank, err := e.b.P2PAttribute(cu.DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, a, b)
	noError(t, err)
	t.Logf("peer %d->%d: can access %v, access supported %d", a, b, ok, rank)
	if !ok {
		t.Skipf("device %d cannot access device %d", a, b)
	}
	j := newJanitor(t, e.b)
	va := j.mustMapping(j.mustCreate(e.g, e.prop(a)), e.g)
	e.c.check(t, "peer/grant-both", e.b.SetAccess(va, e.g, append(rw(a), rw(b)...)))
	want := Pattern(byte(8+a*16+b), int(e.g))
	noError(t, e.b.CopyHtoD(b, va, want), "write from the peer's context")
	requireBytes(t, e.b, a, va, want)
	requireBytes(t, e.b, b, va, want)
	f, err := e.b.GetAccess(devLoc(b), va)
	noError(t, err)
	equal(t, cu.MEM_ACCESS_FLAGS_PROT_READWRITE, f)
	// Memory on device b, filled by device a's copy.
	vb := j.mustMapping(j.mustCreate(e.g, e.prop(b)), e.g)
	noError(t, e.b.SetAccess(vb, e.g, append(rw(b), rw(a)...)))
	noError(t, e.b.CopyDtoD(a, vb, va, e.g), "device a copies its memory into device b's")
	requireBytes(t, e.b, b, vb, want)
	// read-only for the peer
	e.c.check(t, "peer/read-only", e.b.SetAccess(vb, e.g, access(devLoc(a), cu.MEM_ACCESS_FLAGS_PROT_READ)))
	requireBytes(t, e.b, a, vb, want)
}

func testMulticast(t *testing.T, e *env) {
	skipIf(t, !e.caps.Multicast, "not declared: Capabilities.Multicast (never on shared GPU machines)")
	v, err := e.b.Attribute(0, cu.DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED)
	noError(t, err)
	skipIf(t, v == 0, "device 0 has no multicast")
	n := min(e.ndev, 2)
	prop := &cu.MulticastObjectProp{NumDevices: uint32(n), HandleTypes: 0}
	mg, err := e.b.MulticastGranularity(prop, cu.MULTICAST_GRANULARITY_MINIMUM)
	noError(t, err)
	prop.Size = mg
	j := newJanitor(t, e.b)
	mc, err := j.adopt(e.b.MulticastCreate(prop))
	noError(t, err)
	mem := j.mustCreate(mg, e.prop(0))
	// Binding before every device is added is refused.
	noError(t, e.b.MulticastAddDevice(mc, 0))
	if n > 1 {
		isError(t, e.b.MulticastBindMem(mc, 0, mem, 0, mg, 0), "bind before all devices are added")
		noError(t, e.b.MulticastAddDevice(mc, 1))
	}
	noError(t, e.b.MulticastBindMem(mc, 0, mem, 0, mg, 0))
	mems := []cu.MemHandle{mem}
	for d := 1; d < n; d++ {
		m := j.mustCreate(mg, e.prop(d))
		noError(t, e.b.MulticastBindMem(mc, 0, m, 0, mg, 0))
		mems = append(mems, m)
	}
	// A mapping of the multicast object writes every replica.
	va := j.mustMapping(mc, mg)
	var desc []cu.MemAccessDesc
	for d := range n {
		desc = append(desc, rw(d)...)
	}
	noError(t, e.b.SetAccess(va, mg, desc))
	want := j.mustWrite(va, 9, 4096)
	for d, m := range mems {
		r := j.mustMapping(m, mg)
		noError(t, e.b.SetAccess(r, mg, rw(d)))
		requireBytes(t, e.b, d, r, want)
	}
	for d := range n {
		noError(t, e.b.MulticastUnbind(mc, d, 0, mg))
	}
	isError(t, errOf(e.b.MulticastCreate(&cu.MulticastObjectProp{NumDevices: 0, Size: mg})))
}
