//go:build gpu

package ipc_test

import (
	"errors"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// The real driver over the second transport: a growable buffer's chunks exported in this
// process and fetched back by pidfd_getfd, then exported in a child process and fetched,
// imported, mapped and checked here; this process's write seen by the child; no descriptor
// and no handle leaked. Skipped, with the remedy, where the system refuses pidfd_getfd.
func TestGPUPidfdCrossProcess(t *testing.T) {
	be, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	if n, err := be.DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device (%d, %v)", n, err)
	}
	if v, err := be.Attribute(0, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED); err != nil || v == 0 {
		t.Skipf("device 0 has no POSIX descriptor handles (%d, %v)", v, err)
	}
	lc, _ := be.(interface{ LiveHandles() int })
	before := -1
	if lc != nil {
		before = lc.LiveHandles()
	}
	pidfdCrossProcess(t, "cuda", be)
	if lc != nil {
		require.Equal(t, before, lc.LiveHandles())
	}
}
