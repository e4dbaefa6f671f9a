package cu_test

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
)

// Driver results are Go errors that survive wrapping.
func ExampleResult() {
	err := fmt.Errorf("allocating the KV cache: %w", cu.ERROR_OUT_OF_MEMORY)
	fmt.Println(errors.Is(err, cu.ERROR_OUT_OF_MEMORY))
	if r, ok := cu.ResultOf(err); ok {
		fmt.Println(r.Name(), int(r))
	}
	// Output:
	// true
	// CUDA_ERROR_OUT_OF_MEMORY 2
}

// A handle value the driver never returned is refused before it can reach the driver,
// which would crash the process.
func ExampleMemMap_unknownHandle() {
	err := cu.MemMap(0x7f0000000000, 2<<20, 0, cu.MemHandle(0x1234), 0)
	fmt.Println(errors.Is(err, cu.ErrUnknownHandle), errors.Is(err, cu.ERROR_INVALID_VALUE))
	// Output: true true
}

// Listing devices, with the reason when there is no driver.
func ExampleDeviceCount() {
	n, err := cu.DeviceCount()
	if errors.Is(err, loader.ErrNoDriver) {
		fmt.Println("no CUDA driver on this machine")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range n {
		d, _ := cu.DeviceGet(i)
		name, _ := d.Name()
		vmm, _ := d.Flag(cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
		fmt.Printf("%d: %s, VMM %v\n", i, name, vmm)
	}
}
