//go:build !linux

package main

import (
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/vmm/ipc"
)

// ipcChild is never started here.
type ipcChild struct{}

// startIPCChild is unsupported here.
func startIPCChild(spec string) (*ipcChild, error) { return nil, errIPCUnsupported }

func (*ipcChild) run(req childRequest, exp *ipc.Exported) error { return errIPCUnsupported }

func (*ipcChild) close() {}

// runChildIfRequested never acts as a child here.
func runChildIfRequested(o backend.Opener) (int, bool) { return 0, false }
