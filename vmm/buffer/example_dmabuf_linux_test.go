package buffer_test

import (
	"fmt"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
)

// A buffer that an RDMA NIC writes into grows in three chunks; one dma-buf descriptor
// covers all of them. Taking the extent from cuMemGetAddressRange, as libfabric, UCX,
// torchcomms, Mooncake and monarch did, registers the first chunk only. On a machine with
// a GPU, use vmm.CUDA() instead of the simulator.
func ExampleBuffer_ExportDmaBuf() {
	s, err := sim.New(sim.PresetH200())
	if err != nil {
		panic(err)
	}
	m := vmm.New(s)
	props := vmm.Props{Location: vmm.OnDevice(0), GPUDirectRDMA: true}
	b, err := buffer.New(m, 2<<20, buffer.Options{Props: &props, Policy: buffer.Exact})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	for _, size := range []uint64{4 << 20, 6 << 20} {
		if err := b.Grow(size); err != nil {
			panic(err)
		}
	}

	// The mistake: one mapping's extent.
	_, extent, err := m.Backend().AddressRange(b.Base())
	if err != nil {
		panic(err)
	}
	fmt.Printf("cuMemGetAddressRange: %d MiB of the buffer's %d MiB\n", extent>>20, b.Stats().Committed>>20)

	// Every chunk, one descriptor, the rules checked first.
	d, err := b.ExportDmaBuf()
	if err != nil {
		panic(err)
	}
	defer d.Close()
	fmt.Printf("dma-buf: %d MiB in %d chunks of device %d\n", d.Size>>20, d.Chunks, d.Device)
	// Register it with the NIC here: ibv_reg_dmabuf_mr(pd, 0, d.Size, uint64(d.Addr),
	// d.FD(), access); or pass it to the process that drives the NIC:
	// ipc.SendDmaBuf(conn, d).

	// A shrink that releases a chunk under the descriptor leaves it describing memory the
	// buffer no longer has: export again.
	if err := b.Shrink(4 << 20); err != nil {
		panic(err)
	}
	fmt.Println("stale after the shrink:", b.Stale(d))
	// Output:
	// cuMemGetAddressRange: 2 MiB of the buffer's 6 MiB
	// dma-buf: 6 MiB in 3 chunks of device 0
	// stale after the shrink: true
}
