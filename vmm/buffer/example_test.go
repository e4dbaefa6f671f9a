package buffer_test

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
)

// A buffer grows from 3 MiB to 64 MiB; its base address and its bytes stay where they were.
// On a machine with a GPU, use vmm.CUDA() instead of the simulator.
func Example() {
	s, err := sim.New(sim.PresetH100())
	if err != nil {
		panic(err)
	}
	b, err := buffer.New(vmm.New(s), 3<<20, buffer.Options{Reserve: 8 << 20})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	base := b.Base()
	if _, err := b.WriteAt([]byte("hello, VMM"), 0); err != nil {
		panic(err)
	}
	for size := uint64(4 << 20); size <= 64<<20; size += 4 << 20 {
		if err := b.Grow(size); err != nil {
			panic(err)
		}
	}
	got := make([]byte, 10)
	if _, err := b.ReadAt(got, 0); err != nil {
		panic(err)
	}
	st := b.Stats()
	fmt.Printf("%q, base unchanged: %v\n", got, b.Base() == base)
	fmt.Printf("size %d MiB in %d chunks, %d MiB reserved in %d ranges\n", st.Size>>20, st.Chunks, st.Reserved>>20, st.Reservations)
	// Output:
	// "hello, VMM", base unchanged: true
	// size 64 MiB in 5 chunks, 64 MiB reserved in 4 ranges
}

// When the driver will not extend the reservation in place, the buffer moves to a larger
// range: the same physical chunks are mapped there, nothing is copied.
func Example_remap() {
	s, _ := sim.New(sim.PresetH200())
	b, err := buffer.New(vmm.New(s), 2<<20, buffer.Options{Reserve: 2 << 20})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	_, _ = b.WriteAt([]byte("kept"), 0)
	// Something else takes the addresses right after the buffer.
	blocker, _ := s.Reserve(2<<20, 0, b.Base()+2<<20, 0)
	defer s.Free(blocker, 2<<20)
	if err := b.Grow(8 << 20); err != nil {
		panic(err)
	}
	got := make([]byte, 4)
	_, _ = b.ReadAt(got, 0)
	st := b.Stats()
	fmt.Printf("%s: hints refused %d, remaps %d, chunks %d\n", got, st.HintsRefused, st.Remaps, st.Chunks)
	// Output:
	// kept: hints refused 1, remaps 1, chunks 2
}

// SetConfig changes how the chunks committed next are made: here they are GPUDirect RDMA
// capable and device 1 may only read them. A device that lacks what is asked for says so
// before anything is allocated.
func ExampleBuffer_SetConfig() {
	s, _ := sim.New(sim.PresetHGX8())
	b, err := buffer.New(vmm.New(s), 2<<20, buffer.Options{Policy: buffer.Exact, Access: vmm.ReadWrite(1)})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	err = b.SetConfig(buffer.Config{
		Props:  vmm.Props{GPUDirectRDMA: true},
		Access: append(vmm.ReadWrite(0), vmm.ReadOnly(1)...),
	})
	if err != nil {
		panic(err)
	}
	if err := b.Grow(6 << 20); err != nil {
		panic(err)
	}
	for _, c := range b.Chunks() {
		fmt.Printf("%d MiB at %d MiB: RDMA %v\n", c.Size>>20, c.Offset>>20, c.Props.GPUDirectRDMA)
	}

	ws, _ := sim.New(sim.PresetWorkstation())
	rdma := vmm.Props{Location: vmm.OnDevice(0), GPUDirectRDMA: true}
	_, err = buffer.New(vmm.New(ws), 2<<20, buffer.Options{Props: &rdma})
	fmt.Println(errors.Is(err, vmm.ErrUnsupported))
	fmt.Println(err)
	// Output:
	// 2 MiB at 0 MiB: RDMA false
	// 4 MiB at 2 MiB: RDMA true
	// true
	// buffer: new 2MiB: check props device 0: not supported by the device: GPUDirect RDMA with VMM (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0)
}
