package vmmfuzz_test

import (
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// FuzzConcurrent runs a program (see decode) on a fresh Sim with several workers at once,
// or one after another when its configuration byte says so, and checks that nothing
// panicked, that every error was descriptive and that closing everything leaves both Sims
// clean and no descriptor open.
//
//	go test -run '^$' -fuzz FuzzConcurrent ./internal/vmmfuzz/
//
// A failure of a concurrent program need not repeat when it is run again: the workers'
// interleaving is the scheduler's. Setting bit 0x20 of its first byte runs the same steps
// in order on one goroutine, which repeats exactly.
func FuzzConcurrent(f *testing.F) {
	for _, seed := range seedPrograms() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		run(t, data)
	})
}

// seedPrograms are a few programs for the corpus: each kind of object made and used, on
// each preset, serially and not.
func seedPrograms() [][]byte {
	var seeds [][]byte
	for c := range 16 {
		seeds = append(seeds, randomProgram(rand.New(rand.NewPCG(uint64(c), 1)), byte(c*0x25), 96))
	}
	return seeds
}

// randomProgram is a program of n steps with configuration byte c.
func randomProgram(r *rand.Rand, c byte, n int) []byte {
	b := make([]byte, 1+n*stepBytes)
	b[0] = c
	for i := range b[1:] {
		b[1+i] = byte(r.Uint32())
	}
	return b
}

// TestConcurrentSeeded is the bounded, deterministic part of the harness that go test
// runs: a fixed set of random programs (the same bytes every time; only the interleaving
// of the concurrent ones varies).
func TestConcurrentSeeded(t *testing.T) {
	programs := 1000
	if testing.Short() {
		programs = 200
	}
	r := rand.New(rand.NewPCG(14, 2026))
	for i := range programs {
		data := randomProgram(r, byte(r.Uint32()), maxSteps)
		ok := t.Run("", func(t *testing.T) { run(t, data) })
		if !ok {
			t.Logf("program %d: %s", i, hex.EncodeToString(data))
			break
		}
	}
}
