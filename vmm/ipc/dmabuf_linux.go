package ipc

import (
	"errors"
	"fmt"
	"io"
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
	r := receiver{conn: conn}
	h, err := r.receiveDmaBuf()
	if err != nil {
		return nil, opError("receive dma-buf", r.args, errors.Join(err, fds.Close(r.fds)))
	}
	return dmaBufOf(r.fds[0], h), nil
}

func (r *receiver) receiveDmaBuf() (DmaBufHeader, error) {
	if err := r.inspect(); err != nil {
		return DmaBufHeader{}, err
	}
	r.oob = make([]byte, r.extra+unix.CmsgSpace(4))
	for {
		if err := r.readDmaBuf(); err != nil {
			return DmaBufHeader{}, err
		}
		if !r.stream || r.got == dmaBufMsgLen {
			break
		}
	}
	var h DmaBufHeader
	if err := h.decode(r.buf[:r.got]); err != nil {
		return DmaBufHeader{}, err
	}
	if len(r.fds) != 1 {
		return DmaBufHeader{}, fmt.Errorf("%w: %d descriptors with a dma-buf header, want 1", ErrProtocol, len(r.fds))
	}
	if err := fds.DmaBuf(r.fds[0]); err != nil {
		return DmaBufHeader{}, err
	}
	end, err := unix.Seek(r.fds[0], 0, unix.SEEK_END)
	if err != nil {
		return DmaBufHeader{}, fmt.Errorf("%w: the descriptor is not a dma-buf: its size cannot be read (%w)", ErrProtocol, err)
	}
	if uint64(end) != h.Size {
		return DmaBufHeader{}, fmt.Errorf("%w: the descriptor's size is %d, the header says %d", ErrProtocol, end, h.Size)
	}
	return h, nil
}

// readDmaBuf reads once into buf[got:] with room for the one descriptor until it came.
func (r *receiver) readDmaBuf() error {
	room := r.extra
	if len(r.fds) == 0 {
		room += unix.CmsgLen(4)
	}
	want := dmaBufMsgLen
	if !r.stream {
		want = dmaBufMsgLen + 1 // a longer message shows as MSG_TRUNC or one byte more
	}
	n, oobn, flags, _, err := r.conn.ReadMsgUnix(r.buf[r.got:want], r.oob[:room])
	var cerr error
	if oobn > 0 {
		cerr = r.take(r.oob[:oobn])
	}
	if n == 0 && errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return fmt.Errorf("%w: more than the one descriptor of a dma-buf message (control data truncated)", ErrProtocol)
	}
	if len(r.fds) > 1 {
		return fmt.Errorf("%w: %d descriptors with a dma-buf header, want 1", ErrProtocol, len(r.fds))
	}
	if flags&unix.MSG_TRUNC != 0 || r.got+n > dmaBufMsgLen {
		return fmt.Errorf("%w: message longer than a dma-buf header (%d bytes)", ErrProtocol, dmaBufMsgLen)
	}
	r.got += n
	if err := checkDmaBufPrefix(r.buf[:r.got]); err != nil {
		return err
	}
	switch {
	case n > 0:
		return nil
	case r.stream && r.got == 0 && len(r.fds) == 0:
		return fmt.Errorf("connection closed before a message: %w", io.EOF)
	case r.stream:
		return fmt.Errorf("%w: connection closed after %d header bytes: %w", ErrProtocol, r.got, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%w: empty message or closed connection: %w", ErrProtocol, io.EOF)
}
