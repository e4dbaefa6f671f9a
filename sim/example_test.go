package sim_test

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
)

// A program written against vmm.Backend runs on sim as on the real driver.
func Example() {
	s, err := sim.New(sim.PresetH200())
	if err != nil {
		panic(err)
	}
	prop := &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED,
		Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: 0}}
	g, _ := s.Granularity(prop, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
	h, _ := s.Create(g, prop, 0)
	va, _ := s.Reserve(g, 0, 0, 0)
	_ = s.Map(va, g, 0, h, 0)
	_ = s.SetAccess(va, g, []cu.MemAccessDesc{{Location: prop.Location, Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}})
	_ = s.CopyHtoD(0, va, []byte("hello, device"))
	out := make([]byte, 13)
	_ = s.CopyDtoH(0, out, va)
	fmt.Println(string(out))

	// Errors carry the driver's result.
	err = s.Map(va, g, 0, h, 0)
	fmt.Println(errors.Is(err, cu.ERROR_INVALID_VALUE))

	_ = s.Unmap(va, g)
	_ = s.Free(va, g)
	_ = s.Release(h)
	fmt.Println(s.Stats().Clean())
	// Output:
	// hello, device
	// true
	// true
}

// FailNth makes a chosen call fail, to test error paths of code under test.
func ExampleSim_FailNth() {
	s, _ := sim.New(sim.PresetH100())
	_ = s.FailNth(sim.OpCreate, 1, cu.ERROR_OUT_OF_MEMORY)
	prop := &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED,
		Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: 0}}
	_, err := s.Create(2<<20, prop, 0)
	r, _ := cu.ResultOf(err)
	fmt.Println(r.Name())
	// Output: CUDA_ERROR_OUT_OF_MEMORY
}

// Presets model real machines; Preset looks one up by name.
func ExamplePreset() {
	cfg, _ := sim.Preset("hgx8")
	s, _ := sim.New(cfg)
	n, _ := s.DeviceCount()
	info, _ := s.Device(0)
	fmt.Println(n, info.Name, sim.Presets())
	// Output: 8 NVIDIA H200 [h100 h200 h200-no-nvml hgx8 hgx8-degraded hgx8-fm-down mnnvl mnnvl-no-channel oldgpu workstation]
}

// Without an IMEX channel, fabric handles are refused as on a real H100 or H200.
func ExampleConfig_iMEX() {
	prop := &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, RequestedHandleTypes: cu.MEM_HANDLE_TYPE_FABRIC,
		Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: 0}}
	cfg := sim.PresetH100()
	s, _ := sim.New(cfg)
	_, err := s.Create(2<<20, prop, 0)
	fmt.Println(errors.Is(err, cu.ERROR_NOT_PERMITTED))

	cfg.IMEX = true
	s, _ = sim.New(cfg)
	h, err := s.Create(2<<20, prop, 0)
	fmt.Println(err)
	_ = s.Release(h)
	// Output:
	// true
	// <nil>
}
