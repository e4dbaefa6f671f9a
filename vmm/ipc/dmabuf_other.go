//go:build !linux

package ipc

import (
	"net"

	"github.com/cuvmm/cuvmm/vmm"
)

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
