package checkpoint_test

import (
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/stretchr/testify/assert"
)

// TestPreflightOfThisProcess reads the real /proc: this test process has a state (R or S
// natively; qemu-user, which runs the arm64 tests, writes its own /proc/self/stat), has no
// libcuda, and its descriptors can be read.
func TestPreflightOfThisProcess(t *testing.T) {
	r := checkpoint.Preflight(os.DirFS("/"), os.Getpid())
	assert.NotEmpty(t, r.State)
	assert.NotEmpty(t, r.Comm)
	assert.False(t, r.CUDA)
	if assert.Len(t, r.Hazards, 1) {
		assert.Contains(t, r.Hazards[0].What, "no CUDA process")
	}
}
