//go:build !linux

package ipc

import (
	"fmt"
	"net"

	"github.com/cuvmm/cuvmm/vmm"
)

// Send passes descriptors over conn: Linux only; here it returns ErrUnsupported.
func Send(conn *net.UnixConn, e *Exported) error {
	return opError("send", "", ErrUnsupported)
}

// SendFDs passes descriptors over conn: Linux only; here it returns ErrUnsupported.
func SendFDs(conn *net.UnixConn, h Header, fds []int) error {
	return opError("send", fmt.Sprintf("%d descriptors", len(fds)), ErrUnsupported)
}

// Receive receives descriptors from conn: Linux only; here it returns ErrUnsupported.
func Receive(conn *net.UnixConn) (*Received, error) {
	return nil, opError("receive", "", ErrUnsupported)
}

// ReceiveAndImport is Receive then Import: Linux only; here it returns ErrUnsupported.
func ReceiveAndImport(conn *net.UnixConn, m *vmm.Manager, access []int) (*Imported, error) {
	return nil, opError("receive", "", ErrUnsupported)
}

// SendDmaBuf passes a dma-buf descriptor over conn: Linux only; here it returns
// ErrUnsupported.
func SendDmaBuf(conn *net.UnixConn, d *vmm.DmaBuf) error {
	return opError("send dma-buf", "", ErrUnsupported)
}

// ReceiveDmaBuf receives a dma-buf descriptor from conn: Linux only; here it returns
// ErrUnsupported.
func ReceiveDmaBuf(conn *net.UnixConn) (*vmm.DmaBuf, error) {
	return nil, opError("receive dma-buf", "", ErrUnsupported)
}
