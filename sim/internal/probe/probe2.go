package probe

import (
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Run2 isolates one fault per call on a clean layout. addrRange, when not nil, replaces
// b.AddressRange (the real driver needs a current context for it).
func Run2(b vmm.Backend, w io.Writer, addrRange func(cu.DevicePtr) (cu.DevicePtr, uint64, error)) {
	p := func(name string, err error, extra ...any) {
		s := name + ": " + res(err)
		if len(extra) > 0 && err == nil {
			s += " " + fmt.Sprint(extra...)
		}
		fmt.Fprintln(w, s)
	}
	if addrRange == nil {
		addrRange = b.AddressRange
	}
	dev := func(id int32) cu.MemLocation { return cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: id} }
	prop := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: dev(0)}
	rw := []cu.MemAccessDesc{{Location: dev(0), Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}
	ro := []cu.MemAccessDesc{{Location: dev(0), Flags: cu.MEM_ACCESS_FLAGS_PROT_READ}}
	none := []cu.MemAccessDesc{{Location: dev(0), Flags: cu.MEM_ACCESS_FLAGS_PROT_NONE}}
	A, _ := b.Reserve(16*mib, 0, 0, 0)
	B, _ := b.Reserve(16*mib, 0, 0, 0)
	C, _ := b.Reserve(16*mib, 0, 0, 0)
	p("Free B", b.Free(B, 16*mib))
	D, _ := b.Reserve(8*mib, 0, 0, 0)
	E, _ := b.Reserve(8*mib, 0, 0, 0)
	fmt.Fprintf(w, "layout B-A=%d C-A=%d D-A=%d E-D=%d\n", int64(B-A), int64(C-A), int64(D-A), int64(E-D))
	h1, _ := b.Create(4*mib, &prop, 0)
	h2, _ := b.Create(2*mib, &prop, 0)
	h3, _ := b.Create(2*mib, &prop, 0)
	mp := func(name string, ptr cu.DevicePtr, size, off uint64, h cu.MemHandle, unmap bool) {
		err := b.Map(ptr, size, off, h, 0)
		p("Map "+name, err)
		if err == nil && unmap {
			p("  Unmap "+name, b.Unmap(ptr, size))
		}
	}
	mp("ok", A, 4*mib, 0, h1, true)
	mp("offset 2M size 2M", A, 2*mib, 2*mib, h1, true)
	mp("offset 2M size 2M (h1 4M) at A+2M", A+2*mib, 2*mib, 2*mib, h1, true)
	mp("ptr+64K", A+64<<10, 2*mib, 0, h2, true)
	mp("size 3M", A, 3*mib, 0, h1, true)
	mp("size 6M > 4M", A, 6*mib, 0, h1, true)
	mp("size 2M < 4M", A, 2*mib, 0, h1, true)
	mp("hole B", B, 2*mib, 0, h2, true)
	mp("A end into hole", A+14*mib, 4*mib, 0, h1, true)
	mp("hole into C", C-2*mib, 4*mib, 0, h1, true)
	mp("way off", 0x10000, 2*mib, 0, h2, true)
	mp("D end into E", D+6*mib, 4*mib, 0, h1, false)
	p("SetAccess D+6M 4M", b.SetAccess(D+6*mib, 4*mib, rw))
	f, err := b.GetAccess(dev(0), E+1*mib)
	p("GetAccess E+1M", err, f)
	base, size, err := addrRange(E)
	p("AddressRange E", err, int64(base)-int64(D), " ", size)
	p("Free D while cross-mapped", b.Free(D, 8*mib))
	p("Unmap D+6M 2M", b.Unmap(D+6*mib, 2*mib))
	p("Unmap D+6M 4M", b.Unmap(D+6*mib, 4*mib))

	// A: h1 at A (4M), h2 at A+4M, nothing at A+6M..; h3 at A+8M.
	mp("h1@A", A, 4*mib, 0, h1, false)
	mp("h2@A+4M", A+4*mib, 2*mib, 0, h2, false)
	mp("h3@A+8M", A+8*mib, 2*mib, 0, h3, false)
	mp("h1 alias @C", C, 4*mib, 0, h1, false)
	mp("overlap tail of h1", A+2*mib, 2*mib, 0, h2, true)
	ga := func(name string, loc cu.MemLocation, ptr cu.DevicePtr) {
		f, err := b.GetAccess(loc, ptr)
		p("GetAccess "+name, err, f)
	}
	ga("unset", dev(0), A)
	ga("unmapped in reservation", dev(0), A+6*mib)
	ga("hole", dev(0), B)
	sa := func(name string, ptr cu.DevicePtr, size uint64, d []cu.MemAccessDesc) {
		p("SetAccess "+name, b.SetAccess(ptr, size, d))
	}
	sa("none on unset", A, 4*mib, none)
	ga("after none", dev(0), A)
	sa("h1+h2+gap+h3", A, 10*mib, rw)
	sa("h1+h2", A, 6*mib, rw)
	sa("none after rw", A+4*mib, 2*mib, none)
	ga("h2 after none", dev(0), A+4*mib)
	sa("h3 ro", A+8*mib, 2*mib, ro)
	sa("host id0", A, 4*mib, []cu.MemAccessDesc{{Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}, Flags: 3}})
	sa("hostnuma id0", A, 4*mib, []cu.MemAccessDesc{{Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}, Flags: 3}})
	sa("dev -1", A, 4*mib, []cu.MemAccessDesc{{Location: dev(-1), Flags: 3}})
	sa("dev0 twice", A, 4*mib, []cu.MemAccessDesc{rw[0], ro[0]})
	ga("after twice", dev(0), A)
	sa("rw back", A, 4*mib, rw)
	ga("host id0", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}, A)
	ga("host id7", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST, ID: 7}, A)
	ga("hostnuma id0", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA}, A)
	ga("hostnumacur", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT}, A)
	ga("host id0 on none-mapping", cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}, A+4*mib)
	ga("dev1", dev(1), A)
	ga("type 9", cu.MemLocation{Type: 9}, A)
	ga("middle of h1", dev(0), A+3*mib+5)
	ga("alias unset", dev(0), C)

	buf := make([]byte, 2*mib)
	for i := range buf {
		buf[i] = byte(i*13 + 1)
	}
	got := make([]byte, 2*mib)
	p("HtoD into ro h3", b.CopyHtoD(0, A+8*mib, buf))
	p("DtoH from ro h3", b.CopyDtoH(0, got, A+8*mib))
	fmt.Fprintf(w, "ro reads zero: %v\n", got[0] == 0 && got[len(got)-1] == 0)
	p("Memset ro h3", b.MemsetD8(0, A+8*mib, 1, 16))
	p("DtoD ro->rw", b.CopyDtoD(0, A, A+8*mib, mib))
	p("DtoD rw->ro", b.CopyDtoD(0, A+8*mib, A, mib))
	p("HtoD h1 end into none h2", b.CopyHtoD(0, A+3*mib, buf))
	p("DtoH from none h2", b.CopyDtoH(0, got, A+4*mib))
	p("HtoD h1 into gap", b.CopyHtoD(0, A+3*mib+mib/2, buf[:mib]))
	p("HtoD h1", b.CopyHtoD(0, A+2*mib, buf))
	p("DtoH alias no access", b.CopyDtoH(0, got, C+2*mib))
	sa("alias ro", C, 4*mib, ro)
	p("DtoH alias ro", b.CopyDtoH(0, got, C+2*mib))
	fmt.Fprintf(w, "alias sees: %v\n", string(got) == string(buf))
	p("DtoD alias->h1 overlapping src=dst", b.CopyDtoD(0, A+2*mib, C+2*mib, 2*mib))
	p("DtoD across hole", b.CopyDtoD(0, A, C-mib, 2*mib))

	ar := func(name string, ptr cu.DevicePtr) {
		base, size, err := addrRange(ptr)
		p("AddressRange "+name, err, int64(base)-int64(A), " ", size)
	}
	ar("A", A)
	ar("A+3M", A+3*mib)
	ar("A+4M (h2)", A+4*mib)
	ar("A+6M unmapped", A+6*mib)
	ar("A+8M (h3)", A+8*mib)
	ar("hole", B)
	ar("C alias", C+mib)

	rh, err := b.Retain(A + 6*mib)
	p("Retain unmapped in reservation", err, rh == h1, rh == h2, rh == h3, rh)
	if err == nil {
		b.Release(rh)
	}
	_, err = b.Retain(B)
	p("Retain hole", err)

	p("Unmap h1+h2+gap", b.Unmap(A, 8*mib))
	p("Unmap h2+gap", b.Unmap(A+4*mib, 4*mib))
	p("Unmap gap+h3", b.Unmap(A+6*mib, 4*mib))
	p("Unmap h1 + half h2", b.Unmap(A, 5*mib))
	p("Unmap whole reservation A", b.Unmap(A, 16*mib))
	p("Unmap h1+h2", b.Unmap(A, 6*mib))
	p("Unmap h3", b.Unmap(A+8*mib, 2*mib))
	p("Unmap alias C", b.Unmap(C, 4*mib))
	p("Release h1", b.Release(h1))
	p("Release h2", b.Release(h2))
	p("Release h3", b.Release(h3))
	p("Free A", b.Free(A, 16*mib))
	p("Free C", b.Free(C, 16*mib))
	p("Free D", b.Free(D, 8*mib))
	p("Free E", b.Free(E, 8*mib))
	p("Free D+E as one", b.Free(D, 16*mib))
}
