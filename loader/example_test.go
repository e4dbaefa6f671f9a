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
