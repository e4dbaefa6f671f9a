package probe

import (
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Run3 checks range rules at reservation edges.
func Run3(b vmm.Backend, w io.Writer) {
	p := func(name string, err error, extra ...any) {
		s := name + ": " + res(err)
		if len(extra) > 0 && err == nil {
			s += " " + fmt.Sprint(extra...)
		}
		fmt.Fprintln(w, s)
	}
	dev := func(id int32) cu.MemLocation { return cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: id} }
	prop := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: dev(0)}
	rw := []cu.MemAccessDesc{{Location: dev(0), Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}
	X, _ := b.Reserve(8*mib, 0, 0, 0)
	Y, _ := b.Reserve(8*mib, 0, 0, 0)
	Z, _ := b.Reserve(8*mib, 0, 0, 0)
	p("Free Y", b.Free(Y, 8*mib))
	fmt.Fprintf(w, "layout Y-X=%d Z-X=%d\n", int64(Y-X), int64(Z-X))
	h, _ := b.Create(4*mib, &prop, 0)
	h2, _ := b.Create(2*mib, &prop, 0)
	p("Map X end into freed Y", b.Map(X+6*mib, 4*mib, 0, h, 0))
	p("Map Y (freed)", b.Map(Y, 4*mib, 0, h, 0))
	p("SetAccess unmapped reserved", b.SetAccess(X, 4*mib, rw))
	p("SetAccess unreserved", b.SetAccess(Y, 4*mib, rw))
	p("Unmap unmapped reserved", b.Unmap(X, 4*mib))
	p("Unmap unreserved", b.Unmap(Y, 4*mib))
	p("Unmap X end into Y", b.Unmap(X+6*mib, 4*mib))
	p("Map h@X", b.Map(X, 4*mib, 0, h, 0))
	p("SetAccess h + rest of X", b.SetAccess(X, 8*mib, rw))
	p("SetAccess h + rest of X + Y", b.SetAccess(X, 12*mib, rw))
	p("SetAccess rest of X (unmapped)", b.SetAccess(X+4*mib, 4*mib, rw))
	p("Free X while mapped", b.Free(X, 8*mib))
	p("Unmap X + Y", b.Unmap(X, 12*mib))
	p("Unmap X whole", b.Unmap(X, 8*mib))
	p("Map h2 at Z", b.Map(Z, 2*mib, 0, h2, 0))
	p("Map h at Z+2M", b.Map(Z+2*mib, 4*mib, 0, h, 0))
	p("SetAccess Z 6M", b.SetAccess(Z, 6*mib, rw))
	buf := make([]byte, 4*mib)
	p("HtoD across h2,h", b.CopyHtoD(0, Z+mib, buf))
	p("Unmap Z 8M", b.Unmap(Z, 8*mib))
	p("Release h", b.Release(h))
	p("Release h2", b.Release(h2))
	p("Free X", b.Free(X, 8*mib))
	p("Free Z", b.Free(Z, 8*mib))
	a, err := b.Reserve(2*mib, 4*mib, 0, 0)
	p("Reserve align 4M", err, a%(4*mib) == 0)
	b.Free(a, 2*mib)
	a, err = b.Reserve(4*mib, 0, Z+2*mib, 0)
	p("Reserve hint inside free", err, a == Z+2*mib)
	b.Free(a, 4*mib)
	q := prop
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST}
	q.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	hh, err := b.Create(2*mib, &q, 0)
	p("Create host posix", err)
	if err == nil {
		pr, _ := b.Properties(hh)
		fmt.Fprintf(w, "  %+v\n", pr)
		b.Release(hh)
	}
	q.Location = cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_HOST_NUMA, ID: 5}
	_, err = b.Create(2*mib, &q, 0)
	p("Create hostnuma 5", err)
}
