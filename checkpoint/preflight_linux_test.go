package checkpoint_test

import (
	"os"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPreflightOfThisProcess reads the real /proc: this test process has a state (R or S
// natively; qemu-user, which runs the arm64 tests, writes its own /proc/self/stat), and
// its descriptors can be read. It is a CUDA process exactly when libcuda is in its maps
// (the gpu-tagged tests of this binary load it), and then shows no hazard; otherwise the
// one hazard is that it is no CUDA process.
func TestPreflightOfThisProcess(t *testing.T) {
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	cuda := strings.Contains(string(maps), "/libcuda.so")
	r := checkpoint.Preflight(os.DirFS("/"), os.Getpid())
	assert.NotEmpty(t, r.State)
	assert.NotEmpty(t, r.Comm)
	assert.NotZero(t, r.Resident)
	assert.Equal(t, cuda, r.CUDA)
	if cuda {
		assert.Empty(t, r.Hazards)
	} else if assert.Len(t, r.Hazards, 1) {
		assert.Contains(t, r.Hazards[0].What, "no CUDA process")
	}
}
