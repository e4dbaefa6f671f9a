//go:build !linux

package vmmfuzz_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/ipc/pidfd"
)

// openFDs is nil: the descriptors are not listed here.
func openFDs(testing.TB) fdSet { return nil }

func warmUp() {}

// ipcTransfer checks that sending fails as it should where descriptors cannot be passed.
func (w *world) ipcTransfer(a *args) {
	if e, ok := pick(w, a, &w.exported); ok {
		w.check("ipc.Send", ipc.Send(nil, e), "send")
	}
	_, err := ipc.Receive(nil)
	w.check("ipc.Receive", err, "receive")
}

// ipcTicket checks that fetching fails as it should where pidfd_getfd is not available.
func (w *world) ipcTicket(a *args) {
	_, err := pidfd.Fetch(pidfd.Ticket{})
	w.check("pidfd.Fetch", err, "fetch")
}
