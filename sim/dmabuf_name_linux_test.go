package sim

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// FuzzDmaBufName parses dma-buf memfd names, which whatever process made the memfd chooses:
// a name that parses describes a dma-buf ExportDmaBuf could have made, and says the same
// once written again.
//
//	go test -run '^$' -fuzz '^FuzzDmaBufName$' ./sim/
func FuzzDmaBufName(f *testing.F) {
	props := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: 3},
		RequestedHandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, GPUDirectRDMACapable: 1, Usage: 7}
	for _, d := range []DmaBuf{
		{Addr: 0x302000000, Size: 2 << 20, Device: 3, Chunks: 4, Props: props},
		{Addr: 1 << 47, Size: 4096, Device: 3, Chunks: 1, Flags: 1, Props: props},
	} {
		f.Add(encodeDmaBuf(d))
	}
	for _, name := range []string{
		"cuvmm-sim.dmabuf:a=1,s=2,d=-7,n=-5,f=0,p=+1:0:1:0:-1:0:0",
		"cuvmm-sim.dmabuf:a=1,s=2,d=0,n=1,f=0,p=1:0:1:0:0:0:65536",
		"cuvmm-sim.dmabuf:a=ffffffffffffffff,s=18446744073709551615,d=2147483647,n=1,f=0,p=1:0:1:2147483647:255:255:65535",
	} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		d, err := decodeDmaBuf(name)
		if err != nil {
			return
		}
		if !d.possible() {
			t.Fatalf("%q parses to %v, which ExportDmaBuf could not make", name, d)
		}
		again, err := decodeDmaBuf(encodeDmaBuf(d))
		if err != nil || again != d {
			t.Fatalf("%q parses to %v; written again and parsed, %v (%v)", name, d, again, err)
		}
	})
}
