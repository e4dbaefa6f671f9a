//go:build gpu

package pidfd_test

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

// The real driver over the second transport: a growable buffer's chunks exported in this
// process and fetched back by pidfd_getfd, then exported in a child process and fetched,
// imported, mapped and checked here; this process's write seen by the child; no descriptor
// and no handle leaked. Skipped, with the remedy, where the system refuses pidfd_getfd.
func TestGPUPidfdCrossProcess(t *testing.T) {
	withPosixFDDriver(t, func(be vmm.Backend) { pidfdCrossProcess(t, "cuda", be) })
}

// The manifest on the real driver, whose exported descriptors are all open on one file: a
// ticket pointed at another export's manifest or at an exported descriptor, or with another
// secret, takes nothing.
func TestGPUTicketGrantsOnlyItsExport(t *testing.T) {
	withPosixFDDriver(t, func(be vmm.Backend) {
		lc, ok := be.(interface{ LiveHandles() int })
		require.True(t, ok, "the CUDA backend counts its handles")
		ticketGrantsOnlyItsExport(t, be, func() [4]int { return [4]int{lc.LiveHandles()} })
	})
}
