// The cgo baseline lives in a module of its own so that the library stays cgo-free.
module github.com/cuvmm/cuvmm/bench/cgo

go 1.25.0
