//go:build gpu

package ipc_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
)

// The real driver over the second transport: a growable buffer's chunks exported in this
// process and fetched back by pidfd_getfd, then exported in a child process and fetched,
// imported, mapped and checked here; this process's write seen by the child; no descriptor
// and no handle leaked. Skipped, with the remedy, where the system refuses pidfd_getfd.
func TestGPUPidfdCrossProcess(t *testing.T) {
	withPosixFDDriver(t, func(be vmm.Backend) { pidfdCrossProcess(t, "cuda", be) })
}
