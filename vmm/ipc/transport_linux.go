package ipc

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cuvmm/cuvmm/vmm"
	"golang.org/x/sys/unix"
)

// Send writes e's header and passes its descriptors over conn in one message. e keeps its
// descriptors: the kernel passes copies.
func Send(conn *net.UnixConn, e *Exported) error {
	if e == nil {
		return &Error{Op: "send", Err: fmt.Errorf("%w: nil Exported", ErrInvalid)}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.fds) == 0 {
		return &Error{Op: "send", Err: ErrClosed}
	}
	return SendFDs(conn, e.Header, e.fds)
}

// SendFDs writes h and passes fds (one per size of h) over conn in one message. The
// descriptors stay the caller's.
func SendFDs(conn *net.UnixConn, h Header, fds []int) error {
	args := fmt.Sprintf("%d descriptors", len(fds))
	if conn == nil {
		return &Error{Op: "send", Args: args, Err: fmt.Errorf("%w: nil connection", ErrInvalid)}
	}
	if len(fds) != len(h.Sizes) {
		return &Error{Op: "send", Args: args, Err: fmt.Errorf("%w: %d descriptors for %d sizes", ErrInvalid, len(fds), len(h.Sizes))}
	}
	msg, err := h.MarshalBinary()
	if err != nil {
		return &Error{Op: "send", Args: args, Err: err}
	}
	n, oobn, err := conn.WriteMsgUnix(msg, unix.UnixRights(fds...), nil)
	if err != nil {
		return &Error{Op: "send", Args: args, Err: err}
	}
	if n != len(msg) || oobn == 0 {
		return &Error{Op: "send", Args: args, Err: fmt.Errorf("%w: short write (%d of %d bytes)", ErrProtocol, n, len(msg))}
	}
	// On a stream socket the kernel may take part of the header; the descriptors went with
	// the first byte, the rest follows as plain bytes.
	if n < len(msg) {
		if _, err := conn.Write(msg[n:]); err != nil {
			return &Error{Op: "send", Args: args, Err: err}
		}
	}
	return nil
}

// Receive reads one message from conn: a header and its descriptors. The returned
// *Received owns the descriptors; on error every descriptor that arrived is closed.
// Descriptors are received close-on-exec.
func Receive(conn *net.UnixConn) (*Received, error) {
	if conn == nil {
		return nil, &Error{Op: "receive", Err: fmt.Errorf("%w: nil connection", ErrInvalid)}
	}
	var fds []int
	fail := func(err error) (*Received, error) {
		return nil, &Error{Op: "receive", Err: errors.Join(err, closeFDs(fds))}
	}
	stream, err := isStream(conn)
	if err != nil {
		return fail(err)
	}
	oob := make([]byte, unix.CmsgSpace(4*MaxDescriptors))
	buf := make([]byte, maxHeaderLen)
	// read fills buf[got:want]: on a message socket in one read (whatever is not read is
	// lost, so read all the room there is), on a stream socket exactly the bytes the header
	// has left, so as not to eat into the next message.
	got := 0
	read := func(want int) error {
		for got < want {
			p := buf[got:want]
			if !stream {
				p = buf[got:]
			}
			n, oobn, flags, _, err := conn.ReadMsgUnix(p, oob)
			// Take the descriptors first: they are ours to close whatever else happened.
			if oobn > 0 {
				more, perr := parseRights(oob[:oobn])
				fds = append(fds, more...)
				if perr != nil {
					return perr
				}
			}
			if err != nil {
				return err
			}
			if flags&unix.MSG_CTRUNC != 0 {
				return fmt.Errorf("%w: descriptors truncated (more than %d sent)", ErrProtocol, MaxDescriptors)
			}
			if flags&unix.MSG_TRUNC != 0 {
				return fmt.Errorf("%w: message longer than %d bytes", ErrProtocol, maxHeaderLen)
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			got += n
			if !stream {
				return nil
			}
		}
		return nil
	}
	if err := read(headerFixed); err != nil {
		return fail(err)
	}
	total, err := headerLen(buf[:got])
	if err != nil {
		return fail(err)
	}
	if got < total {
		if !stream {
			return fail(fmt.Errorf("%w: message of %d bytes, header needs %d", ErrProtocol, got, total))
		}
		if err := read(total); err != nil {
			return fail(err)
		}
	}
	if got != total {
		return fail(fmt.Errorf("%w: message of %d bytes, header says %d", ErrProtocol, got, total))
	}
	var h Header
	if err := h.UnmarshalBinary(buf[:total]); err != nil {
		return fail(err)
	}
	if len(fds) != len(h.Sizes) {
		return fail(fmt.Errorf("%w: %d descriptors for %d allocations", ErrProtocol, len(fds), len(h.Sizes)))
	}
	return &Received{Header: h, fds: fds}, nil
}

// parseRights returns every descriptor in the control messages, with an error if any
// message is not SCM_RIGHTS or is malformed (the descriptors found are still returned).
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("%w: control message: %v", ErrProtocol, err)
	}
	var fds []int
	var bad error
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			bad = fmt.Errorf("%w: control message level %d type %d", ErrProtocol, msgs[i].Header.Level, msgs[i].Header.Type)
			continue
		}
		more, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			bad = fmt.Errorf("%w: rights: %v", ErrProtocol, err)
			continue
		}
		fds = append(fds, more...)
	}
	return fds, bad
}

func isStream(conn *net.UnixConn) (bool, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return false, err
	}
	var typ int
	var serr error
	if err := rc.Control(func(fd uintptr) { typ, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE) }); err != nil {
		return false, err
	}
	if serr != nil {
		return false, fmt.Errorf("socket type: %w", serr)
	}
	return typ == unix.SOCK_STREAM, nil
}

func closeFDs(fds []int) error {
	var errs []error
	for _, fd := range fds {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, fmt.Errorf("close fd %d: %w", fd, err))
		}
	}
	return errors.Join(errs...)
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
