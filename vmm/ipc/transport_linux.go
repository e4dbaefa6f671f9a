package ipc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc/internal/fds"
	"golang.org/x/sys/unix"
)

// Send writes e's header and passes its descriptors over conn in one message. e keeps its
// descriptors: the kernel passes copies.
func Send(conn *net.UnixConn, e *Exported) error {
	if e == nil {
		return opError("send", "", invalid("a nil Exported"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.fds) == 0 {
		return opError("send", "", vmm.ErrClosed)
	}
	return SendFDs(conn, e.Header, e.fds)
}

// SendFDs writes h and passes fds (one per size of h) over conn in one message. The
// descriptors stay the caller's.
func SendFDs(conn *net.UnixConn, h Header, fds []int) error {
	args := fmt.Sprintf("%d descriptors", len(fds))
	if conn == nil {
		return opError("send", args, invalid("a nil connection"))
	}
	if len(fds) != len(h.Sizes) {
		return opError("send", args, invalid("%d descriptors for %d sizes", len(fds), len(h.Sizes)))
	}
	msg, err := h.encode()
	if err == nil {
		err = sendMsg(conn, msg, fds...)
	}
	return opError("send", args, err)
}

// sendMsg writes msg and passes fds over conn in one message.
func sendMsg(conn *net.UnixConn, msg []byte, fds ...int) error {
	n, oobn, err := conn.WriteMsgUnix(msg, unix.UnixRights(fds...), nil)
	if err != nil {
		return err
	}
	if n == 0 || oobn == 0 {
		return fmt.Errorf("%w: short write (%d of %d bytes)", ErrProtocol, n, len(msg))
	}
	// On a stream socket the kernel may take part of the header; the descriptors went with
	// the first byte, the rest follows as plain bytes.
	if n < len(msg) {
		_, err = conn.Write(msg[n:])
	}
	return err
}

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
	h := DmaBufHeader{Addr: d.Addr, Size: d.Size, Device: d.Device, Chunks: d.Chunks, PCIe: d.PCIe, Generation: d.Generation}
	msg, err := h.encode()
	if err == nil {
		// Use keeps the descriptor open (and its number d's) until the kernel has taken it.
		err = d.Use(func(fd int) error { return sendMsg(conn, msg, fd) })
	}
	return opError("send dma-buf", args, err)
}

// Receive reads one message from conn: a header and its descriptors. The returned
// *Received owns the descriptors; on error every descriptor that arrived is closed.
// Descriptors are received close-on-exec.
//
// The peer is not trusted. Receive takes at most MaxDescriptors descriptors and, once the
// header's count has arrived, no more than it announces: each read gives the kernel room
// for no more, so an excess is never installed in this process, and the read that brings
// one fails the receive with ErrProtocol. On a stream socket Receive reads exactly the
// header's bytes, however the peer splits them, and fails at the first byte no valid
// header has. It blocks until the header is complete: set a deadline on conn to bound the
// wait. A connection closed before the first byte is io.EOF. A descriptor that cannot be
// memory (a socket, pipe, directory or block device) fails the receive with ErrProtocol,
// as Fetch refuses it.
//
// Of the other control messages the socket's options may bring, credentials
// (SO_PASSCRED) are accepted and not looked at and pidfds (SO_PASSPIDFD) are closed; any
// other (timestamps, security labels) fails the receive. Each read also gives the kernel
// room for the credentials and pidfd; where it writes the pidfd after the descriptors
// (Linux 6.18 does), up to six more descriptors could take that room, and are closed with
// the same error.
func Receive(conn *net.UnixConn) (*Received, error) {
	if conn == nil {
		return nil, opError("receive", "", invalid("a nil connection"))
	}
	r := receiver{conn: conn, kind: kindMemory}
	var h Header
	err := r.receive(&h)
	if err == nil && len(r.fds) != len(h.Sizes) {
		err = fmt.Errorf("%w: %d descriptors for %d allocations", ErrProtocol, len(r.fds), len(h.Sizes))
	}
	for i := 0; err == nil && i < len(r.fds); i++ {
		err = fds.Memory(r.fds[i], i)
	}
	if err != nil {
		return nil, opError("receive", r.args, errors.Join(err, fds.CloseForeign(r.fds)))
	}
	return &Received{Header: h, fds: r.fds}, nil
}

// ReceiveDmaBuf reads one dma-buf message from conn: the returned DmaBuf owns the
// descriptor (Close it), and holds what the header says (Addr, Size, Device, Chunks, PCIe,
// Generation; not the properties). The peer is not trusted: exactly one descriptor is
// taken (any more fail the receive, and every descriptor that arrived is closed), the header
// is refused at its first wrong byte, the descriptor must be a dma-buf (a file of the
// kernel's dma-buf file system, or on sim a dma-buf sim exported: a memfd so named and
// sealed), and its own size (lseek to its end, which a dma-buf answers) must be the size
// the header claims. It blocks until the message is complete: set a deadline on conn to
// bound the wait.
func ReceiveDmaBuf(conn *net.UnixConn) (*vmm.DmaBuf, error) {
	if conn == nil {
		return nil, opError("receive dma-buf", "", invalid("a nil connection"))
	}
	r := receiver{conn: conn, kind: kindDmaBuf}
	var h DmaBufHeader
	err := r.receive(&h)
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
		return nil, opError("receive dma-buf", r.args, errors.Join(err, fds.CloseForeign(r.fds)))
	}
	d := vmm.NewDmaBuf(r.fds[0], h.Addr, h.Size)
	d.Device, d.Chunks, d.PCIe, d.Generation = h.Device, h.Chunks, h.PCIe, h.Generation
	return d, nil
}

// receiver is the state of one Receive or ReceiveDmaBuf.
type receiver struct {
	conn *net.UnixConn
	kind uint16 // of the message expected
	args string
	typ  int // SO_TYPE
	// extra is the control room the socket's own options take in every read (credentials,
	// a pidfd), given on top of the room for descriptors.
	extra int
	buf   [maxMsgLen]byte
	got   int
	oob   []byte
	fds   []int
}

// receive reads one whole message of r.kind into buf and its descriptors, and decodes its
// header into h.
func (r *receiver) receive(h interface{ decode([]byte) error }) error {
	if err := r.inspect(); err != nil {
		return err
	}
	r.oob = make([]byte, r.extra+unix.CmsgLen(4*r.limit()))
	if r.typ != unix.SOCK_STREAM {
		// One read takes the whole message; what does not fit is lost, so offer all the room.
		if err := r.read(len(r.buf)); err != nil {
			return err
		}
		return h.decode(r.buf[:r.got])
	}
	for r.got < msgPrefix {
		if err := r.read(msgPrefix); err != nil {
			return err
		}
	}
	// Exactly the bytes the message has left, so as not to eat into the next one.
	count, _ := checkPrefix(r.buf[:r.got], r.kind)
	for n := msgLen(r.kind, count); r.got < n; {
		if err := r.read(n); err != nil {
			return err
		}
	}
	return h.decode(r.buf[:r.got])
}

// socketNames name the socket types for errors.
var socketNames = map[int]string{
	unix.SOCK_STREAM: "stream socket", unix.SOCK_SEQPACKET: "seqpacket socket", unix.SOCK_DGRAM: "datagram socket",
}

// inspect reads the socket's type and the options that add control messages to reads.
func (r *receiver) inspect() error {
	rc, err := r.conn.SyscallConn()
	if err != nil {
		return err
	}
	var typ, cred, pidfd int
	var terr, cerr error
	if err := rc.Control(func(fd uintptr) {
		typ, terr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		cred, cerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED)
		// ENOPROTOOPT before Linux 6.5: no pidfds then.
		pidfd, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSPIDFD)
	}); err != nil {
		return err
	}
	if err := errors.Join(terr, cerr); err != nil {
		return fmt.Errorf("socket options: %w", err)
	}
	r.typ, r.args = typ, socketNames[typ]
	if r.args == "" {
		r.args = fmt.Sprintf("socket of type %d", typ)
	}
	if a, ok := r.conn.LocalAddr().(*net.UnixAddr); ok && a != nil && a.Name != "" && a.Name != "@" {
		r.args += " " + a.Name
	}
	if cred != 0 {
		r.extra += unix.CmsgSpace(unix.SizeofUcred)
	}
	if pidfd != 0 {
		r.extra += unix.CmsgSpace(4)
	}
	return nil
}

// limit is the most descriptors the message may carry: MaxDescriptors (a dma-buf's one)
// until its count has arrived, then the count.
func (r *receiver) limit() int {
	if c, err := checkPrefix(r.buf[:r.got], r.kind); err == nil && c > 0 {
		return c
	}
	if r.kind == kindDmaBuf {
		return 1
	}
	return MaxDescriptors
}

// read reads once into buf[got:want] with room for the descriptors the message may still
// carry, and checks what came.
func (r *receiver) read(want int) error {
	limit := r.limit()
	room := r.extra
	if allow := limit - len(r.fds); allow > 0 {
		room += unix.CmsgLen(4 * allow)
	}
	n, oobn, flags, _, err := r.conn.ReadMsgUnix(r.buf[r.got:want], r.oob[:room])
	// Take the descriptors first: they are ours to close whatever else happened.
	var cerr error
	if oobn > 0 {
		cerr = r.take(r.oob[:oobn])
	}
	if n == 0 && errors.Is(err, io.EOF) {
		// Package net reports a read of 0 bytes on a stream or seqpacket socket as io.EOF;
		// below says what it means (an empty message may have brought descriptors).
		err = nil
	}
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return fmt.Errorf("%w: more descriptors than the %d allowed, with %d header bytes (control data truncated)", ErrProtocol, limit, r.got+n)
	}
	if flags&unix.MSG_TRUNC != 0 {
		return fmt.Errorf("%w: message longer than %d bytes", ErrProtocol, maxMsgLen)
	}
	r.got += n
	if _, err := checkPrefix(r.buf[:r.got], r.kind); err != nil {
		return err
	}
	if limit := r.limit(); len(r.fds) > limit {
		return fmt.Errorf("%w: %d descriptors with %d header bytes, more than the %d allowed", ErrProtocol, len(r.fds), r.got, limit)
	}
	if n > 0 {
		return nil
	}
	switch {
	case r.typ == unix.SOCK_STREAM && r.got == 0 && len(r.fds) == 0:
		return fmt.Errorf("connection closed before a message: %w", io.EOF)
	case r.typ == unix.SOCK_STREAM:
		return fmt.Errorf("%w: connection closed after %d header bytes: %w", ErrProtocol, r.got, io.ErrUnexpectedEOF)
	case len(r.fds) > 0:
		return fmt.Errorf("%w: empty message with %d descriptors", ErrProtocol, len(r.fds))
	case r.typ == unix.SOCK_SEQPACKET:
		// A seqpacket read of 0 bytes is an empty message or a closed connection.
		return fmt.Errorf("%w: empty message or closed connection: %w", ErrProtocol, io.EOF)
	}
	return fmt.Errorf("%w: empty message", ErrProtocol)
}

// take collects the descriptors of the control messages in oob and closes pidfds. A
// message whose length runs past oob (truncated) still gives what it holds, so that no
// descriptor escapes.
func (r *receiver) take(oob []byte) error {
	const lenSize = unix.SizeofCmsghdr - 8 // cmsg_len is a size_t, level and type two ints
	ne := binary.NativeEndian
	ints := func(b []byte) []int {
		var v []int
		for ; len(b) >= 4; b = b[4:] {
			v = append(v, int(int32(ne.Uint32(b))))
		}
		return v
	}
	var bad error
	for len(oob) >= unix.SizeofCmsghdr {
		var l uint64
		if lenSize == 8 {
			l = ne.Uint64(oob)
		} else {
			l = uint64(ne.Uint32(oob))
		}
		level, typ := int32(ne.Uint32(oob[lenSize:])), int32(ne.Uint32(oob[lenSize+4:]))
		if l < unix.SizeofCmsghdr {
			// Nothing after it can be located.
			return errors.Join(bad, fmt.Errorf("%w: control message of %d bytes", ErrProtocol, l))
		}
		if l > uint64(len(oob)) {
			bad = errors.Join(bad, fmt.Errorf("%w: control message of %d bytes truncated to %d", ErrProtocol, l, len(oob)))
			l = uint64(len(oob))
		}
		data := oob[unix.SizeofCmsghdr:l]
		switch {
		case level == unix.SOL_SOCKET && typ == unix.SCM_RIGHTS:
			r.fds = append(r.fds, ints(data)...)
		case level == unix.SOL_SOCKET && typ == unix.SCM_PIDFD:
			// The kernel made them for this read: pidfds, whose close waits on nothing.
			bad = errors.Join(bad, fds.Close(ints(data)))
		case level == unix.SOL_SOCKET && typ == unix.SCM_CREDENTIALS:
			// The kernel vouches for them, and the caller asked for them (SO_PASSCRED).
		default:
			bad = errors.Join(bad, fmt.Errorf("%w: unexpected control message (level %d, type %d)", ErrProtocol, level, typ))
		}
		next := unix.CmsgSpace(int(l) - unix.SizeofCmsghdr)
		if next >= len(oob) {
			break
		}
		oob = oob[next:]
	}
	return bad
}

// ReceiveAndImport receives one message from conn, imports and maps what it carries with
// access for the devices of access (see Import), and closes the descriptors it received
// whatever happens.
func ReceiveAndImport(conn *net.UnixConn, m *vmm.Manager, access []int) (*Imported, error) {
	r, err := Receive(conn)
	if err != nil {
		return nil, err
	}
	imp, err := Import(m, r, access)
	if cerr := r.Close(); cerr != nil {
		if imp != nil {
			cerr = errors.Join(cerr, imp.Close())
		}
		return nil, errors.Join(err, cerr)
	}
	return imp, err
}
