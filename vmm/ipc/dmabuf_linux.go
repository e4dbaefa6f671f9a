package ipc

import (
	"errors"
	"fmt"
	"net"

	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc/internal/fds"
	"golang.org/x/sys/unix"
)

// SendDmaBuf writes a header describing d and passes d's descriptor over conn in one
// message. d keeps its descriptor: the kernel passes a copy.
func SendDmaBuf(conn *net.UnixConn, d *vmm.DmaBuf) error {
	if d == nil {
		return opError("send dma-buf", "", invalid("a nil DmaBuf"))
	}
	args := fmt.Sprintf("%v+%s", d.Addr, units.Size(d.Size))
	if conn == nil {
		return opError("send dma-buf", args, invalid("a nil connection"))
	}
	h := headerOf(d)
	if err := h.validate(); err != nil {
		return opError("send dma-buf", args, err)
	}
	msg := h.encode()
	// Use keeps the descriptor open (and its number d's) until the kernel has taken it.
	err := d.Use(func(fd int) error {
		n, oobn, err := conn.WriteMsgUnix(msg, unix.UnixRights(fd), nil)
		if err != nil {
			return err
		}
		if n != len(msg) || oobn == 0 {
			if n == 0 || oobn == 0 {
				return fmt.Errorf("%w: short write (%d of %d bytes)", ErrProtocol, n, len(msg))
			}
			// A stream socket took part of the header; the descriptor went with it.
			_, err = conn.Write(msg[n:])
		}
		return err
	})
	if err != nil {
		return opError("send dma-buf", args, err)
	}
	return nil
}

// ReceiveDmaBuf reads one dma-buf message from conn: the returned DmaBuf owns the
// descriptor (Close it), and holds what the header says (Addr, Size, Device, Chunks, PCIe,
// Generation; not the properties). The peer is not trusted: exactly one descriptor is
// taken (any more fail the receive, and every descriptor that arrived is closed), the header
// is refused at its first wrong byte, the descriptor must be a dma-buf (a file of the
// kernel's dma-buf file system, or on sim a dma-buf sim exported: a memfd so named and
// sealed), and its own size (lseek to its end, which a dma-buf answers) must be the size
// the header claims. It blocks until the message is
// complete: set a deadline on conn to bound the wait.
func ReceiveDmaBuf(conn *net.UnixConn) (*vmm.DmaBuf, error) {
	if conn == nil {
		return nil, opError("receive dma-buf", "", invalid("a nil connection"))
	}
	r := receiver{conn: conn, kind: kindDmaBuf}
	var h DmaBufHeader
	err := r.receive()
	if err == nil {
		err = h.decode(r.buf[:r.got])
	}
	if err == nil && len(r.fds) != 1 {
		err = fmt.Errorf("%w: %d descriptors with a dma-buf header, want 1", ErrProtocol, len(r.fds))
	}
	if err == nil {
		err = fds.DmaBuf(r.fds[0])
	}
	if err == nil {
		var end int64
		if end, err = unix.Seek(r.fds[0], 0, unix.SEEK_END); err != nil {
			err = fmt.Errorf("%w: the descriptor is not a dma-buf: its size cannot be read (%w)", ErrProtocol, err)
		} else if uint64(end) != h.Size {
			err = fmt.Errorf("%w: the descriptor's size is %d, the header says %d", ErrProtocol, end, h.Size)
		}
	}
	if err != nil {
		return nil, opError("receive dma-buf", r.args, errors.Join(err, fds.Close(r.fds)))
	}
	return dmaBufOf(r.fds[0], h), nil
}
