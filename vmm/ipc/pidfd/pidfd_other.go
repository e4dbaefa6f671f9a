//go:build !linux

package pidfd

import (
	"strconv"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
)

// noPidfd is the error of the pidfd transport where there is none.
var noPidfd = &refusal{
	what:   "pidfd_getfd is Linux's (5.6+)",
	remedy: "fabric handles (FabricHandle) cross processes here where the device has them",
	is:     []error{vmm.ErrUnsupported, ipc.ErrUnsupported},
}

// Publish makes a ticket that grants e's descriptors to an importer that fetches them with
// pidfd_getfd: Linux only; here it returns an error matching ipc.ErrUnsupported and
// vmm.ErrUnsupported.
func Publish(e *ipc.Exported) (Ticket, error) {
	return Ticket{}, opError("publish", "", noPidfd)
}

// Fetch takes the descriptors a ticket grants with pidfd_getfd: Linux only; here it returns
// an error matching ipc.ErrUnsupported and vmm.ErrUnsupported.
func Fetch(t Ticket, opts ...FetchOption) (*ipc.Received, error) {
	return nil, opError("fetch", "ticket of process "+strconv.Itoa(t.PID), noPidfd)
}

// FetchAndImport is Fetch then Import: Linux only; here it returns an error matching
// ErrUnsupported and vmm.ErrUnsupported.
func FetchAndImport(t Ticket, m *vmm.Manager, access []int, opts ...FetchOption) (*ipc.Imported, error) {
	_, err := Fetch(t, opts...)
	return nil, err
}

// AllowImporter lets a process take this one's descriptors with pidfd_getfd: Linux only;
// here it returns an error matching ipc.ErrUnsupported and vmm.ErrUnsupported.
func AllowImporter(pid int) error {
	return opError("allow importer", strconv.Itoa(pid), noPidfd)
}

// AllowAnyImporter lets every process take this one's descriptors with pidfd_getfd: Linux
// only; here it returns an error matching ipc.ErrUnsupported and vmm.ErrUnsupported.
func AllowAnyImporter() error {
	return opError("allow importer", "any", noPidfd)
}
