package vmm_test

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// The whole cycle: physical memory, an address range, a mapping, access, data.
func Example() {
	s, _ := sim.New(sim.PresetH200()) // vmm.CUDA() on a machine with a GPU
	m := vmm.New(s)

	g, _ := m.Granularity(vmm.DeviceProps(0), false)
	mem, _ := m.Create(4*g, vmm.DeviceProps(0))
	defer mem.Close()
	r, _ := m.Reserve(4 * g)
	defer r.Close()
	mp, _ := r.Map(0, mem, 0, 4*g)
	_ = mp.SetAccess(vmm.ReadWrite(0)...)

	_ = m.CopyIn(0, mp.Addr(), []byte("hello, device"))
	out := make([]byte, 13)
	_ = m.CopyOut(0, out, mp.Addr())
	fmt.Printf("%s, granularity %d MiB\n", out, g>>20)
	// Output: hello, device, granularity 2 MiB
}

// Use the real driver when there is one, the simulator otherwise.
func ExampleCUDA() {
	var b vmm.Backend
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		b, _ = sim.New(sim.PresetH100())
	}
	n, _ := b.DeviceCount()
	fmt.Println(n > 0)
	// Output: true
}

// Errors name the operation and wrap the driver's result.
func ExampleError() {
	s, _ := sim.New(sim.PresetH200())
	m := vmm.New(s)
	_, err := m.Create(3<<20, vmm.DeviceProps(0)) // not a multiple of the 2 MiB granularity
	fmt.Println(err)
	fmt.Println(errors.Is(err, cu.ERROR_INVALID_VALUE))
	// Output:
	// vmm: create 3MiB on device 0: CUDA_ERROR_INVALID_VALUE: one or more of the parameters passed to the API call is not within an acceptable range of values (size is not a positive multiple of the granularity)
	// true
}
