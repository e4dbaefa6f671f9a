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

// withPosixFDDriver runs run on the real driver, skipping the test where there is none or
// device 0 has no POSIX descriptor handles, and checks that run leaves the process holding
// the handles it held before.
func withPosixFDDriver(t *testing.T, run func(vmm.Backend)) {
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
	run(be)
	if lc != nil {
		require.Equal(t, before, lc.LiveHandles())
	}
}

// The real driver: a growable buffer's chunks exported, sent to a child process over a
// socket, imported and checked there; the child's write seen here; no descriptor leaked.
func TestGPUCrossProcess(t *testing.T) {
	withPosixFDDriver(t, func(be vmm.Backend) { crossProcess(t, "cuda", be) })
}
