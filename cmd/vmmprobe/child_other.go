//go:build !linux

package main

import (
	"errors"

	"github.com/cuvmm/cuvmm/vmm"
)

// errIPCUnsupported is returned where descriptors cannot be passed to a child (not Linux).
var errIPCUnsupported = errors.New("cross-process file descriptor passing needs Linux")

// ipcSupported says whether the cross-process check can run here.
const ipcSupported = false

// ipcChild is never started here.
type ipcChild struct{}

// startIPCChild is unsupported here: passing descriptors over SCM_RIGHTS needs Linux.
func startIPCChild(spec string) (*ipcChild, error) { return nil, errIPCUnsupported }

func (*ipcChild) run(fd, dev int, size uint64, seed byte) error { return errIPCUnsupported }

func (*ipcChild) close() {}

// runChildIfRequested never acts as a child here.
func runChildIfRequested(open func(spec string) (vmm.Backend, error)) (int, bool) { return 0, false }
