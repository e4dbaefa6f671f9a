package checkpoint_test

import (
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/stretchr/testify/assert"
)

// TestPreflightOfThisProcess reads the real /proc: this test process runs, has no libcuda,
// and its descriptors can be read.
func TestPreflightOfThisProcess(t *testing.T) {
	r := checkpoint.Preflight(os.DirFS("/"), os.Getpid())
	assert.Contains(t, []string{"R", "S"}, r.State)
	assert.NotEmpty(t, r.Comm)
	assert.False(t, r.CUDA)
	if assert.Len(t, r.Hazards, 1) {
		assert.Contains(t, r.Hazards[0].What, "no CUDA process")
	}
}
