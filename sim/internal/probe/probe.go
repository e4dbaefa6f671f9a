// Package probe runs a fixed list of VMM calls, mostly failing ones, against a vmm.Backend
// and prints one line per call, so the real driver and sim can be diffed line by line.
package probe

import (
	"fmt"
	"io"
	"os"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

const mib = 1 << 20

func res(err error) string {
	if err == nil {
		return "OK"
	}
	if r, ok := cu.ResultOf(err); ok {
		return r.Name()
	}
	return "ERR(" + err.Error() + ")"
}

// Run runs every case on b, writing "name: result" lines to w.
func Run(b vmm.Backend, w io.Writer, verbose bool) {
	p := func(name string, err error, extra ...any) {
		s := name + ": " + res(err)
		if len(extra) > 0 && err == nil {
			s += " " + fmt.Sprint(extra...)
		}
		fmt.Fprintln(w, s)
	}
	v, err := b.DriverVersion()
	p("DriverVersion", err, v)
	n, err := b.DeviceCount()
	p("DeviceCount", err, n)
	info, err := b.Device(0)
	p("Device0", err, fmt.Sprintf("%q %d cc%d.%d", info.Name, info.TotalMem, info.ComputeMajor, info.ComputeMinor))
	if verbose {
		p("Device0.extra", err, info.UUID.String(), " ", info.PCIBusID)
	}
	_, err = b.Device(n)
	p("Device(n)", err)
	_, err = b.Device(-1)
	p("Device(-1)", err)
	if verbose {
		for _, a := range cu.DeviceAttributes() {
			v, err := b.Attribute(0, a)
			if err != nil || v != 0 {
				p("attr "+a.String(), err, v)
			}
		}
	}
	for _, a := range []cu.DeviceAttribute{cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
		cu.DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cu.DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED,
		cu.DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu.DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED} {
		v, err := b.Attribute(0, a)
		p("attr0 "+a.String(), err, v)
	}
	_, err = b.Attribute(n, cu.DEVICE_ATTRIBUTE_WARP_SIZE)
	p("Attribute(n)", err)
	_, err = b.Attribute(0, cu.DeviceAttribute(100000))
	p("Attribute(0,100000)", err)
	_, err = b.Attribute(0, cu.DeviceAttribute(0))
	p("Attribute(0,0)", err)
	ok, err := b.CanAccessPeer(0, 0)
	p("CanAccessPeer(0,0)", err, ok)
	_, err = b.CanAccessPeer(0, n)
	p("CanAccessPeer(0,n)", err)
	for a := cu.P2PAttribute(1); a <= 6; a++ {
		v, err := b.P2PAttribute(a, 0, 0)
		p(fmt.Sprintf("P2PAttribute(%d,0,0)", a), err, v)
	}

	dev := func(id int32) cu.MemLocation { return cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: id} }
	prop := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: dev(0)}
	gr := func(name string, pr cu.MemAllocationProp, o cu.MemAllocationGranularityFlags) {
		g, err := b.Granularity(&pr, o)
		p("Granularity "+name, err, g)
	}
	gr("min", prop, 0)
	gr("rec", prop, 1)
	gr("option2", prop, 2)
	_, err = b.Granularity(nil, 0)
	p("Granularity nil", err)
	q := prop
	q.Type = cu.MEM_ALLOCATION_TYPE_MANAGED
	gr("managed", q, 0)
	q.Type = 0
	gr("typeinvalid", q, 0)
	q = prop
	q.Location = dev(int32(n))
	gr("dev n", q, 0)
	q.Location = dev(-1)
	gr("dev -1", q, 0)
	q.Location = cu.MemLocation{}
	gr("loc invalid", q, 0)
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}
	gr("loc host", q, 0)
	gr("loc host rec", q, 1)
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}
	gr("loc hostnuma0", q, 0)
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT}
	gr("loc hostnumacur", q, 0)
	q = prop
	q.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_FABRIC
	gr("fabric", q, 0)
	q.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	gr("posix", q, 0)
	q.RequestedHandleTypes = 0x10
	gr("htype 0x10", q, 0)

	mcp := cu.MulticastObjectProp{NumDevices: 1, Size: 2 * mib}
	g, err := b.MulticastGranularity(&mcp, 0)
	p("MulticastGranularity min", err, g)
	g, err = b.MulticastGranularity(&mcp, 1)
	p("MulticastGranularity rec", err, g)
	_, err = b.MulticastGranularity(nil, 0)
	p("MulticastGranularity nil", err)
	mcp.NumDevices = 0
	_, err = b.MulticastGranularity(&mcp, 0)
	p("MulticastGranularity numdev0", err)

	var live []cu.MemHandle
	cr := func(name string, size uint64, pr cu.MemAllocationProp, flags uint64) cu.MemHandle {
		h, err := b.Create(size, &pr, flags)
		p("Create "+name, err)
		if err == nil {
			got, err := b.Properties(h)
			if err != nil || got != pr {
				p("  Properties "+name, err, propString(got))
			}
			live = append(live, h)
		}
		return h
	}
	cr("size0", 0, prop, 0)
	cr("size1", 1, prop, 0)
	cr("size64K", 64<<10, prop, 0)
	cr("size2M+64K", 2*mib+64<<10, prop, 0)
	cr("flags1", 2*mib, prop, 1)
	q = prop
	q.Type = cu.MEM_ALLOCATION_TYPE_MANAGED
	cr("managed", 2*mib, q, 0)
	q.Type = 0
	cr("typeinvalid", 2*mib, q, 0)
	q = prop
	q.Location = dev(int32(n))
	cr("dev n", 2*mib, q, 0)
	q.Location = dev(-1)
	cr("dev -1", 2*mib, q, 0)
	q.Location = cu.MemLocation{}
	cr("loc invalid", 2*mib, q, 0)
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}
	cr("loc host", 2*mib, q, 0)
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}
	cr("loc hostnuma0", 2*mib, q, 0)
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT}
	cr("loc hostnumacur", 2*mib, q, 0)
	for _, t := range []cu.MemHandleType{1, 2, 4, 8, 9, 0x10} {
		q = prop
		q.RequestedHandleTypes = t
		cr(fmt.Sprintf("htype %#x", t), 2*mib, q, 0)
	}
	q = prop
	q.CompressionType = cu.MEM_ALLOCATION_COMP_GENERIC
	cr("compression", 2*mib, q, 0)
	q.CompressionType = 2
	cr("compression2", 2*mib, q, 0)
	q = prop
	q.GPUDirectRDMACapable = 1
	cr("rdma", 2*mib, q, 0)
	q.GPUDirectRDMACapable = 2
	cr("rdma2", 2*mib, q, 0)
	q = prop
	q.Usage = 1
	cr("usage1", 2*mib, q, 0)
	q.Usage = 4
	cr("usage4", 2*mib, q, 0)
	q = prop
	q.Reserved[0] = 1
	cr("reserved", 2*mib, q, 0)
	cr("1TiB", 1<<40, prop, 0)
	for _, h := range live {
		p("Release", b.Release(h))
	}

	// Reservations.
	rv := func(name string, size, align uint64, hint cu.DevicePtr, flags uint64) cu.DevicePtr {
		a, err := b.Reserve(size, align, hint, flags)
		extra := ""
		if err == nil {
			extra = fmt.Sprintf("align2M=%v align4M=%v align1G=%v hinthit=%v", a%(2*mib) == 0, a%(4*mib) == 0, a%(1<<30) == 0, hint != 0 && a == hint)
			if verbose {
				extra += fmt.Sprintf(" %#x", uint64(a))
			}
		}
		p("Reserve "+name, err, extra)
		return a
	}
	fr := func(name string, a cu.DevicePtr, size uint64) { p("Free "+name, b.Free(a, size)) }
	rv("size0", 0, 0, 0, 0)
	a := rv("size1", 1, 0, 0, 0)
	if a != 0 {
		fr("size1", a, 1)
	}
	a = rv("size64K", 64<<10, 0, 0, 0)
	if a != 0 {
		fr("size64K", a, 64<<10)
	}
	a = rv("size2M+64K", 2*mib+64<<10, 0, 0, 0)
	if a != 0 {
		fr("size2M+64K", a, 2*mib+64<<10)
	}
	a = rv("align3", 2*mib, 3, 0, 0)
	if a != 0 {
		fr("align3", a, 2*mib)
	}
	a = rv("align64K", 2*mib, 64<<10, 0, 0)
	if a != 0 {
		fr("align64K", a, 2*mib)
	}
	a = rv("align6M", 6*mib, 6*mib, 0, 0)
	if a != 0 {
		fr("align6M", a, 6*mib)
	}
	a = rv("align1G", 2*mib, 1<<30, 0, 0)
	if a != 0 {
		fr("align1G", a, 2*mib)
	}
	a = rv("flags1", 2*mib, 0, 0, 1)
	if a != 0 {
		fr("flags1", a, 2*mib)
	}
	for _, sz := range []uint64{1 << 40, 64 << 40, 128 << 40, 256 << 40, 1 << 50} {
		a = rv(fmt.Sprintf("%dTiB", sz>>40), sz, 0, 0, 0)
		if a != 0 {
			fr(fmt.Sprintf("%dTiB", sz>>40), a, sz)
		}
	}
	r1 := rv("r1 8M", 8*mib, 0, 0, 0)
	r2 := rv("r2 8M", 8*mib, 0, 0, 0)
	if verbose {
		fmt.Fprintf(w, "r2-r1=%d\n", int64(r2)-int64(r1))
	}
	a = rv("hint=r1 (taken)", 8*mib, 0, r1, 0)
	if a != 0 {
		fr("hint taken", a, 8*mib)
	}
	a = rv("hint=r2+16M", 8*mib, 0, r2+16*mib, 0)
	if a != 0 {
		fr("hint free", a, 8*mib)
	}
	a = rv("hint=r2+16M+64K", 8*mib, 0, r2+16*mib+64<<10, 0)
	if a != 0 {
		fr("hint misaligned", a, 8*mib)
	}
	fr("wrong size", r1, 4*mib)
	fr("middle", r1+2*mib, 2*mib)
	fr("middle to end", r1+2*mib, 6*mib)
	fr("two reservations", r1, 16*mib)
	fr("size0", r1, 0)
	fr("unreserved", 0x1000, 2*mib)
	fr("r2", r2, 8*mib)
	fr("r2 again", r2, 8*mib)
	a = rv("after free r2", 8*mib, 0, 0, 0)
	if verbose {
		fmt.Fprintf(w, "reuse r2: %v\n", a == r2)
	}
	r2 = a

	h1 := cr("h1 4M", 4*mib, prop, 0)
	h2 := cr("h2 2M", 2*mib, prop, 0)
	live = nil
	mp := func(name string, ptr cu.DevicePtr, size, off uint64, h cu.MemHandle, flags uint64) error {
		err := b.Map(ptr, size, off, h, flags)
		p("Map "+name, err)
		return err
	}
	um := func(name string, ptr cu.DevicePtr, size uint64) error {
		err := b.Unmap(ptr, size)
		p("Unmap "+name, err)
		return err
	}
	mp("size0", r1, 0, 0, h1, 0)
	mp("misaligned ptr", r1+64<<10, 2*mib, 0, h1, 0)
	mp("misaligned size", r1, 2*mib+64<<10, 0, h1, 0)
	mp("misaligned offset", r1, 2*mib, 64<<10, h1, 0)
	mp("offset+size>alloc", r1, 4*mib, 2*mib, h1, 0)
	mp("size>alloc", r1, 6*mib, 0, h1, 0)
	mp("past reservation end", r1+6*mib, 4*mib, 0, h1, 0)
	mp("spanning two reservations", r2-2*mib, 4*mib, 0, h1, 0)
	mp("unreserved", 0x10000000, 2*mib, 0, h1, 0)
	mp("flags1", r1, 4*mib, 0, h1, 1)
	mp("partial of handle (2M of 4M, offset 2M)", r1+6*mib, 2*mib, 2*mib, h1, 0)
	um("partial-handle mapping", r1+6*mib, 2*mib)
	mp("h1 at r1", r1, 4*mib, 0, h1, 0)
	mp("over existing same", r1, 4*mib, 0, h1, 0)
	mp("overlapping", r1+2*mib, 4*mib, 0, h1, 0)
	mp("over existing other handle", r1, 2*mib, 0, h2, 0)
	mp("h2 at r1+4M", r1+4*mib, 2*mib, 0, h2, 0)
	mp("h1 alias at r2", r2, 4*mib, 0, h1, 0)

	ga := func(name string, loc cu.MemLocation, ptr cu.DevicePtr) {
		f, err := b.GetAccess(loc, ptr)
		p("GetAccess "+name, err, f)
	}
	ga("unset", dev(0), r1)
	ga("unmapped", dev(0), r1+6*mib)
	ga("unreserved", dev(0), 0x1000)
	rw := []cu.MemAccessDesc{{Location: dev(0), Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}
	sa := func(name string, ptr cu.DevicePtr, size uint64, d []cu.MemAccessDesc) {
		p("SetAccess "+name, b.SetAccess(ptr, size, d))
	}
	sa("empty", r1, 4*mib, nil)
	sa("size0", r1, 0, rw)
	sa("unmapped", r1+6*mib, 2*mib, rw)
	sa("mapping+hole", r1+4*mib, 4*mib, rw)
	sa("misaligned size", r1, 64<<10, rw)
	sa("dev n", r1, 4*mib, []cu.MemAccessDesc{{Location: dev(int32(n)), Flags: 3}})
	sa("loc host", r1, 4*mib, []cu.MemAccessDesc{{Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}, Flags: 3}})
	sa("loc invalid", r1, 4*mib, []cu.MemAccessDesc{{Flags: 3}})
	sa("flags2", r1, 4*mib, []cu.MemAccessDesc{{Location: dev(0), Flags: 2}})
	sa("flags7", r1, 4*mib, []cu.MemAccessDesc{{Location: dev(0), Flags: 7}})
	sa("two descs second bad", r1, 4*mib, []cu.MemAccessDesc{{Location: dev(0), Flags: 3}, {Location: dev(int32(n)), Flags: 3}})
	ga("after failed", dev(0), r1)
	sa("partial first 2M of h1", r1, 2*mib, rw)
	ga("r1 after partial", dev(0), r1)
	ga("r1+2M after partial", dev(0), r1+2*mib)
	sa("read only", r1, 4*mib, []cu.MemAccessDesc{{Location: dev(0), Flags: cu.MEM_ACCESS_FLAGS_PROT_READ}})
	ga("read", dev(0), r1+3*mib)
	sa("spanning h1+h2", r1, 6*mib, rw)
	ga("rw middle", dev(0), r1+5*mib+7)
	ga("loc host", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}, r1)
	ga("loc dev n", dev(int32(n)), r1)
	ga("loc invalid", cu.MemLocation{}, r1)
	ga("alias unset", dev(0), r2)
	sa("none", r2, 4*mib, []cu.MemAccessDesc{{Location: dev(0), Flags: 0}})
	ga("alias none", dev(0), r2)

	ar := func(name string, ptr cu.DevicePtr) {
		base, size, err := b.AddressRange(ptr)
		p("AddressRange "+name, err, fmt.Sprintf("base-ptr0=%d size=%d", int64(base)-int64(r1), size))
	}
	ar("r1", r1)
	ar("r1+3M", r1+3*mib)
	ar("r1+4M", r1+4*mib)
	ar("r1+7M unmapped", r1+7*mib)
	ar("unreserved", 0x1000)
	ar("r2 (alias, no access set)", r2)

	// Copies.
	buf := make([]byte, 3*mib)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	p("HtoD span h1,h2", b.CopyHtoD(0, r1+3*mib, buf))
	got := make([]byte, len(buf))
	p("DtoH span h1,h2", b.CopyDtoH(0, got, r1+3*mib))
	fmt.Fprintf(w, "bytes equal: %v\n", string(got) == string(buf))
	got1 := make([]byte, mib)
	p("DtoH alias no access", b.CopyDtoH(0, got1, r2+3*mib))
	p("HtoD alias no access", b.CopyHtoD(0, r2+3*mib, got1))
	sa("alias read", r2, 4*mib, []cu.MemAccessDesc{{Location: dev(0), Flags: cu.MEM_ACCESS_FLAGS_PROT_READ}})
	p("DtoH alias read", b.CopyDtoH(0, got1, r2+3*mib))
	fmt.Fprintf(w, "alias sees: %v\n", string(got1) == string(buf[:mib]))
	p("HtoD alias read-only", b.CopyHtoD(0, r2+3*mib, got1))
	p("DtoD to read-only", b.CopyDtoD(0, r2, r1, mib))
	p("DtoD from read-only", b.CopyDtoD(0, r1, r2, mib))
	p("HtoD past mapping end", b.CopyHtoD(0, r1+5*mib, buf[:2*mib]))
	p("HtoD unmapped", b.CopyHtoD(0, r1+6*mib, buf[:16]))
	p("HtoD unreserved", b.CopyHtoD(0, 0x1000, buf[:16]))
	p("HtoD dev n", b.CopyHtoD(n, r1, buf[:16]))
	p("HtoD empty", b.CopyHtoD(0, r1, nil))
	p("DtoD oversize", b.CopyDtoD(0, r1, r1+mib, 6*mib))
	p("DtoD overlap", b.CopyDtoD(0, r1+1, r1, mib))
	p("DtoD size0", b.CopyDtoD(0, r1, r1, 0))
	p("Memset", b.MemsetD8(0, r1, 0xab, 100))
	p("Memset past end", b.MemsetD8(0, r1+5*mib, 0xab, 2*mib))
	p("Memset unmapped", b.MemsetD8(0, r1+6*mib, 0xab, 2))
	p("Memset readonly", b.MemsetD8(0, r2, 0xab, 2))
	p("Memset 0", b.MemsetD8(0, r1, 0xab, 0))

	// Retain.
	rh, err := b.Retain(r1 + 3*mib)
	p("Retain middle", err, "same=", rh == h1)
	if err == nil {
		p("Release retained", b.Release(rh))
	}
	_, err = b.Retain(r1 + 7*mib)
	p("Retain unmapped", err)
	_, err = b.Retain(0x1000)
	p("Retain unreserved", err)

	// Sharing.
	_, err = b.ExportFD(h1)
	p("ExportFD non-exportable", err)
	_, err = b.ExportFabric(h1)
	p("ExportFabric non-exportable", err)
	_, err = b.ExportWin32(h1, cu.MEM_HANDLE_TYPE_WIN32)
	p("ExportWin32", err)
	q = prop
	q.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	hx, err := b.Create(2*mib, &q, 0)
	p("Create posix", err)
	if err == nil {
		fd, err := b.ExportFD(hx)
		p("ExportFD", err)
		if err == nil {
			hi, err := b.ImportFD(fd)
			p("ImportFD own", err, "same=", hi == hx)
			if err == nil {
				pr, err := b.Properties(hi)
				p("Properties imported", err, propString(pr))
				p("Release imported", b.Release(hi))
			}
			os.NewFile(uintptr(fd), "x").Close()
			_, err = b.ImportFD(fd)
			p("ImportFD closed", err)
		}
		_, err = b.ExportFabric(hx)
		p("ExportFabric posix-only", err)
		p("Release posix", b.Release(hx))
	}
	f, err := os.CreateTemp("", "probe")
	if err == nil {
		f.Truncate(2 * mib)
		_, err = b.ImportFD(int(f.Fd()))
		p("ImportFD tmpfile", err)
		f.Close()
		os.Remove(f.Name())
	}
	_, err = b.ImportFD(1000)
	p("ImportFD 1000", err)
	_, err = b.ImportFabric(cu.MemFabricHandle{})
	p("ImportFabric zero", err)

	// Free while mapped, unmap rules, release while mapped.
	fr("r2 while mapped", r2, 8*mib)
	um("size0", r1, 0)
	um("partial first 2M of h1", r1, 2*mib)
	um("second half of h1", r1+2*mib, 2*mib)
	um("misaligned", r1, 64<<10)
	um("h1+hole", r2, 8*mib)
	um("unmapped", r1+6*mib, 2*mib)
	um("unreserved", 0x10000000, 2*mib)
	p("Release h1 while mapped", b.Release(h1))
	p("DtoH after release", b.CopyDtoH(0, got1, r1+3*mib))
	fmt.Fprintf(w, "bytes kept: %v\n", string(got1) == string(buf[:mib]))
	rh, err = b.Retain(r1)
	p("Retain after release", err, "same=", rh == h1)
	if err == nil {
		p("Release re-retained", b.Release(rh))
	}
	um("h1+h2 together", r1, 6*mib)
	p("Release h2 while unmapped", b.Release(h2))
	um("alias", r2, 4*mib)
	um("alias again", r2, 4*mib)
	fr("r1", r1, 8*mib)
	fr("r2", r2, 8*mib)
}

// propString formats p field by field, as %+v did before the cu types had String methods,
// so recordings stay comparable.
func propString(p cu.MemAllocationProp) string {
	return fmt.Sprintf("{Type:%d RequestedHandleTypes:%d Location:{Type:%d ID:%d} Win32HandleMetaData:%d CompressionType:%d GPUDirectRDMACapable:%d Usage:%d Reserved:%v}",
		p.Type, p.RequestedHandleTypes, p.Location.Type, p.Location.ID, p.Win32HandleMetaData, p.CompressionType, p.GPUDirectRDMACapable, p.Usage, p.Reserved)
}
