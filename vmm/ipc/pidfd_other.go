//go:build !linux

package ipc

import (
	"strconv"

	"github.com/cuvmm/cuvmm/vmm"
)

// noPidfd is the error of the pidfd transport where there is none.
var noPidfd = &refusal{
	what:   "pidfd_getfd is Linux's (5.6+)",
	remedy: "fabric handles (FabricHandle) cross processes here where the device has them",
	is:     []error{vmm.ErrUnsupported, ErrUnsupported},
}

// Ticket grants e's descriptors to an importer that fetches them with pidfd_getfd: Linux
// only; here it returns an error matching ErrUnsupported and vmm.ErrUnsupported.
func (e *Exported) Ticket() (Ticket, error) {
	return Ticket{}, opError("ticket", "", noPidfd)
}

// FetchOption adjusts Fetch and FetchAndImport.
type FetchOption func(*fetchOpts)

type fetchOpts struct{}

// AllowSelf lets Fetch take a ticket that names this very process (Linux only).
func AllowSelf() FetchOption { return func(*fetchOpts) {} }

// Fetch takes the descriptors a ticket grants with pidfd_getfd: Linux only; here it returns
// an error matching ErrUnsupported and vmm.ErrUnsupported.
func Fetch(t Ticket, opts ...FetchOption) (*Received, error) {
	return nil, opError("fetch", "ticket of process "+strconv.Itoa(t.PID), noPidfd)
}

// FetchAndImport is Fetch then Import: Linux only; here it returns an error matching
// ErrUnsupported and vmm.ErrUnsupported.
func FetchAndImport(t Ticket, m *vmm.Manager, access []int, opts ...FetchOption) (*Imported, error) {
	_, err := Fetch(t, opts...)
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

func unmap([]byte) error { return nil }
