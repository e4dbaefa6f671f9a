package vmm_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// A CUDA() that found no driver is not final (cu.Init follows the loader's retry): a process
// started before the driver was installed picks it up later. The retry looks at another path,
// which shows that it was made.
func TestCUDARetriesTheLoad(t *testing.T) {
	if _, err := vmm.CUDA(); err == nil {
		t.Skip("the driver is loaded: there is nothing to retry")
	}
	path := filepath.Join(t.TempDir(), "driver", "libcuda.so.1")
	t.Setenv(loader.EnvPath, path)
	time.Sleep(time.Second + 50*time.Millisecond) // Retry starts no attempt within a second of the last
	require.ErrorIs(t, loader.Default().Retry(), loader.ErrNoDriver)
	_, err := vmm.CUDA()
	require.ErrorIs(t, err, loader.ErrNoDriver)
	require.ErrorContains(t, err, path)
}
