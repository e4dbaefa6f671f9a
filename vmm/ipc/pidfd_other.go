//go:build !linux

package ipc

import (
	"fmt"
	"strconv"

	"github.com/cuvmm/cuvmm/vmm"
)

// noPidfd is the error of the pidfd transport where there is none.
var noPidfd = &refusal{
	what:   "pidfd_getfd is Linux's (5.6+)",
	remedy: "fabric handles (FabricHandle) cross processes here where the device has them",
	is:     []error{vmm.ErrUnsupported, ErrUnsupported},
}

// Ticket describes e's descriptors for an importer that fetches them with pidfd_getfd: Linux
// only; here it returns an error matching ErrUnsupported and vmm.ErrUnsupported.
func (e *Exported) Ticket() (Ticket, error) {
	return Ticket{}, opError("ticket", "", noPidfd)
}

// NewTicket describes descriptors for an importer that fetches them with pidfd_getfd: Linux
// only; here it returns an error matching ErrUnsupported and vmm.ErrUnsupported.
func NewTicket(h Header, fds []int) (Ticket, error) {
	return Ticket{}, opError("ticket", fmt.Sprintf("%d descriptors", len(fds)), noPidfd)
}

// Fetch takes the descriptors a ticket names with pidfd_getfd: Linux only; here it returns
// an error matching ErrUnsupported and vmm.ErrUnsupported.
func Fetch(t Ticket) (*Received, error) {
	return nil, opError("fetch", fmt.Sprintf("%d descriptors of process %d", len(t.Files), t.PID), noPidfd)
}

// FetchAndImport is Fetch then Import: Linux only; here it returns an error matching
// ErrUnsupported and vmm.ErrUnsupported.
func FetchAndImport(t Ticket, m *vmm.Manager, access []int) (*Imported, error) {
	_, err := Fetch(t)
	return nil, err
}

// AllowImporter lets a process take this one's descriptors with pidfd_getfd: Linux only;
// here it returns an error matching ErrUnsupported and vmm.ErrUnsupported.
func AllowImporter(pid int) error {
	return opError("allow importer", strconv.Itoa(pid), noPidfd)
}

// AllowAnyImporter lets every process take this one's descriptors with pidfd_getfd: Linux
// only; here it returns an error matching ErrUnsupported and vmm.ErrUnsupported.
func AllowAnyImporter() error {
	return opError("allow importer", "any", noPidfd)
}
