//go:build !linux

package vmmtest

import (
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
)

// EnvChild marks the re-executed test binary as the child of the cross-process case.
const EnvChild = "CUVMM_VMMTEST_CHILD"

// RunChildIfRequested does nothing here: the cross-process case needs Linux.
func RunChildIfRequested(open func() (vmm.Backend, error)) {}

func testIPC(t *testing.T, e *env) {
	t.Skip("cross-process sharing of POSIX file descriptors: Linux only")
}
