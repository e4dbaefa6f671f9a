//go:build gpu

package ipc_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

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
