package peer_test

import (
	"fmt"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/peer"
)

// Memory of device 0, read by device 1 through the same address.
func Example() {
	s, _ := sim.New(sim.PresetHGX8())
	m := vmm.New(s)
	p, err := peer.New(m, 0, 2<<20)
	if err != nil {
		panic(err)
	}
	defer p.Close()
	if _, err := p.WriteAt([]byte("written by device 0"), 0); err != nil {
		panic(err)
	}
	if err := p.Grant(peer.ReadOnly, 1); err != nil {
		panic(err)
	}
	got := make([]byte, 19)
	if _, err := p.From(1).ReadAt(got, 0); err != nil {
		panic(err)
	}
	fmt.Printf("device 1 reads %q\n", got)
	_, err = p.From(1).WriteAt([]byte("x"), 0)
	fmt.Println("device 1 may write:", err == nil)
	_ = p.Revoke(1)
	_, err = p.From(1).ReadAt(got, 0)
	fmt.Println("after revoke, device 1 reads:", err == nil)
	// Output:
	// device 1 reads "written by device 0"
	// device 1 may write: false
	// after revoke, device 1 reads: false
}

// One range striped over four devices, as cuda-samples' vectorAddMMAP lays out its vectors.
func ExampleStripe() {
	s, _ := sim.New(sim.PresetHGX8())
	st, err := peer.Stripe(vmm.New(s), 32<<20, []int{0, 1, 2, 3}, peer.StripeOptions{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	for _, x := range st.Stripes() {
		fmt.Printf("offset %2d MiB: %d MiB on device %d\n", x.Offset>>20, x.Size>>20, x.Device)
	}
	// Output:
	// offset  0 MiB: 8 MiB on device 0
	// offset  8 MiB: 8 MiB on device 1
	// offset 16 MiB: 8 MiB on device 2
	// offset 24 MiB: 8 MiB on device 3
}
