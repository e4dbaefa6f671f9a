// The cgo baseline lives in a module of its own so that the library stays cgo-free. It
// imports the library only for the interleaved comparison (abops_test.go).
module github.com/cuvmm/cuvmm/bench/cgo

go 1.25.0

require (
	github.com/cuvmm/cuvmm v0.0.0
	golang.org/x/sys v0.47.0
)

require github.com/ebitengine/purego v0.11.3 // indirect

replace github.com/cuvmm/cuvmm => ../..
