//go:build !linux

package vmmtest

import (
	"errors"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// The cross-process case and the dmabuf group need Linux (they skip first elsewhere): what
// follows is never reached.

// EnvChild marks the re-executed test binary as the child of the cross-process case.
const EnvChild = "CUVMM_VMMTEST_CHILD"

// RunChildIfRequested does nothing here: the cross-process case needs Linux.
func RunChildIfRequested(open func() (vmm.Backend, error)) {}

func testIPC(t *testing.T, e *env) {
	t.Skip("cross-process sharing of POSIX file descriptors: Linux only")
}

func sendToChild(t *testing.T, _ *env, _ cu.DevicePtr, _ uint64, _ byte, _, _ []byte) error {
	t.Skip("the child of the cross-process case: Linux only")
	return nil
}

func fileOf(int) (string, error) { return "", errors.New("Linux only") }

func closeDescriptor(int) {}

func descriptorSize(int) (int64, error) { return 0, errors.New("dma-buf descriptors are Linux only") }

func dmaBufDescriptors(*testing.T) []string { return nil }
