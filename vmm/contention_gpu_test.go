//go:build gpu

package vmm_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// TestGPUContention runs contend on the real driver: a released handle is refused by cu's
// handle table without reaching the driver (which would crash the process), and the
// process holds no more handles afterwards than before.
func TestGPUContention(t *testing.T) {
	b := cudaOrSkip(t)
	before, _ := cu.LiveHandles()
	contend(t, b, true)
	if after, refs := cu.LiveHandles(); after != before {
		t.Fatalf("live handles: %d before, %d after (%d references)", before, after, refs)
	}
}
