package vmmtest_test

import (
	"fmt"

	"github.com/cuvmm/cuvmm/vmm/vmmtest"
)

// What the real driver returned in a recorded case: the truth a backend is held to, and
// what a program can expect of the driver without a GPU at hand.
func ExampleRecorded() {
	exp, err := vmmtest.Recorded()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("recorded with driver", exp.Driver, "on", exp.Device)
	fmt.Println("map over a mapping:", exp.Results["map/over-mapping"])
	fmt.Println("dma-buf of a range with a hole:", exp.Results["dmabuf/hole"])
	// Output:
	// recorded with driver 13000 on NVIDIA H200
	// map over a mapping: CUDA_ERROR_INVALID_VALUE
	// dma-buf of a range with a hole: CUDA_ERROR_INVALID_VALUE
}
