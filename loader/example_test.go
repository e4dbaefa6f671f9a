package loader_test

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/loader"
)

// A symbol the driver lacks fails only its own calls.
func ExampleLibrary_NewProc() {
	lib := loader.New(loader.WithPath("/nonexistent/libcuda.so.1"))
	p := lib.NewProc(loader.Symbol{Name: "cuMemCreate", Version: 10020})
	_, err := p.Addr()
	fmt.Println(errors.Is(err, loader.ErrNoDriver))
	// Output: true
}

// A node agent that started before the driver container keeps running without the driver
// and tries again when it is told that the driver is there (or simply on a later use, after
// the backoff). Here the driver never arrives, and the retry comes within a second of the
// first attempt, so it returns that attempt's error without a new one.
func ExampleLibrary_Retry() {
	lib := loader.New(loader.WithPath("/nonexistent/run/nvidia/driver/libcuda.so.1"))
	if err := lib.Load(); errors.Is(err, loader.ErrNoDriver) {
		fmt.Println("no driver yet; serving without it")
	}

	// ... later, when the driver container reports ready:
	if err := lib.Retry(); err != nil {
		fmt.Println("still no driver:", errors.Is(err, loader.ErrNoDriver))
	}
	// Output:
	// no driver yet; serving without it
	// still no driver: true
}
