package ipc_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The receiver against a peer that lies: every case runs over each socket type, and after
// each no descriptor of the peer's is left open in this process and sim holds nothing.

var socketTypes = []int{unix.SOCK_STREAM, unix.SOCK_SEQPACKET, unix.SOCK_DGRAM}

func typeName(typ int) string {
	switch typ {
	case unix.SOCK_STREAM:
		return "stream"
	case unix.SOCK_SEQPACKET:
		return "seqpacket"
	case unix.SOCK_DGRAM:
		return "datagram"
	}
	return fmt.Sprint(typ)
}

// wire encodes an allocations message as it travels, valid or not (version 2, kind 1,
// handle type POSIX descriptor, reserved 0).
func wire(gran uint64, sizes ...uint64) []byte {
	le := binary.LittleEndian
	b := make([]byte, 32+8*len(sizes))
	copy(b, "CUVMMIPC")
	le.PutUint16(b[8:], 2)
	le.PutUint16(b[10:], 1)
	le.PutUint16(b[12:], uint16(len(sizes)))
	le.PutUint16(b[16:], uint16(cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
	le.PutUint64(b[24:], gran)
	for i, s := range sizes {
		le.PutUint64(b[32+8*i:], s)
	}
	return b
}

// patch returns a copy of b with v written at off.
func patch(b []byte, off int, v ...byte) []byte {
	c := append([]byte(nil), b...)
	copy(c[off:], v)
	return c
}

// rawSend is sendmsg(2) as it is: WriteMsgUnix adds a byte to a message that has
// descriptors and no bytes, rawSend does not. It does not block.
//
// An empty message goes as one iovec of length 0, which the kernel treats as no iovec at all:
// qemu-user 7.2 (Debian 12's) answers a sendmsg without iovecs with 0 and sends nothing.
func rawSend(c *net.UnixConn, p, oob []byte) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = rawSendFD(int(fd), p, oob) }); err != nil {
		return err
	}
	return serr
}

// rawSendFD is rawSend on a socket's descriptor.
func rawSendFD(fd int, p, oob []byte) error {
	var msg unix.Msghdr
	var iov unix.Iovec
	var empty [1]byte
	iov.Base = &empty[0]
	if len(p) > 0 {
		iov.Base = &p[0]
	}
	iov.SetLen(len(p))
	msg.Iov = &iov
	msg.SetIovlen(1)
	if len(oob) > 0 {
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	if _, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT); e != 0 {
		return e
	}
	return nil
}

func repeat(fd, n int) []int {
	fds := make([]int, n)
	for i := range fds {
		fds[i] = fd
	}
	return fds
}

// unread is the number of bytes queued on a stream socket.
func unread(t *testing.T, c *net.UnixConn) int {
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	var n int
	var ierr error
	require.NoError(t, rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }))
	require.NoError(t, ierr)
	return n
}

func setsockopt(t *testing.T, c *net.UnixConn, opt int) error {
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, 1) }))
	return serr
}

// fixture is what a hostile peer has to send: two exported sim allocations (2 and 4 MiB)
// and descriptors that are not CUDA memory.
type fixture struct {
	s                   *sim.Sim
	m                   *vmm.Manager
	allocs              []*vmm.Allocation
	e                   *ipc.Exported
	cuda                []int // the exported descriptors
	pipeR, pipeW, devnl *os.File
	file                *os.File
	totalMem            uint64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	fx := &fixture{s: s, m: vmm.New(s)}
	for _, size := range []uint64{2 * mib, 4 * mib} {
		a, err := fx.m.Create(size, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR})
		require.NoError(t, err)
		fx.allocs = append(fx.allocs, a)
	}
	fx.e, err = ipc.Export(fx.m, fx.allocs...)
	require.NoError(t, err)
	fx.cuda = fx.e.FDs()
	fx.pipeR, fx.pipeW, err = os.Pipe()
	require.NoError(t, err)
	fx.devnl, err = os.Open(os.DevNull)
	require.NoError(t, err)
	fx.file, err = os.Create(filepath.Join(t.TempDir(), "not-cuda"))
	require.NoError(t, err)
	_, err = fx.file.Write(make([]byte, 2*mib))
	require.NoError(t, err)
	d, err := s.Device(0)
	require.NoError(t, err)
	fx.totalMem = d.TotalMem
	return fx
}

func (fx *fixture) devnull() int { return int(fx.devnl.Fd()) }

// close closes everything, also after a failure (so that later cases count right), and
// checks that sim is clean.
func (fx *fixture) close(t *testing.T) {
	t.Helper()
	errs := []error{fx.e.Close()}
	for _, a := range fx.allocs {
		errs = append(errs, a.Close())
	}
	for _, f := range []*os.File{fx.pipeR, fx.pipeW, fx.devnl, fx.file} {
		errs = append(errs, f.Close())
	}
	require.NoError(t, errors.Join(errs...))
	require.True(t, fx.s.Stats().Clean(), "%+v", fx.s.Stats())
}

// valid is the true header of the fixture's allocations.
func valid() []byte { return wire(2*mib, 2*mib, 4*mib) }

// env is one case's run: the receiving end and the peer's.
type env struct {
	typ  int
	fx   *fixture
	peer *net.UnixConn
	z    *net.UnixConn
}

// send writes one message (or one chunk of the stream) with descriptors, not blocking.
func (e *env) send(t *testing.T, b []byte, fds ...int) {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	require.NoError(t, rawSend(e.peer, b, oob))
}

// dribble sends b one byte per write, each with n descriptors of fd.
func (e *env) dribble(t *testing.T, b []byte, fd, n int) {
	t.Helper()
	for i := range b {
		e.send(t, b[i:i+1], repeat(fd, n)...)
	}
}

type hostile struct {
	name  string
	types []int                      // nil: all
	setup func(t *testing.T, e *env) // options of the receiving socket
	peer  func(t *testing.T, e *env) // what the peer writes before it closes its end
	want  func(t *testing.T, e *env, r *ipc.Received, err error)
}

// refused wants Receive to fail with ErrProtocol, saying each of says.
func refused(says ...string) func(*testing.T, *env, *ipc.Received, error) {
	return func(t *testing.T, e *env, r *ipc.Received, err error) {
		t.Helper()
		require.ErrorIs(t, err, ipc.ErrProtocol)
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded)
		require.Nil(t, r)
		var ie *vmm.Error
		require.ErrorAs(t, err, &ie)
		require.Equal(t, "receive", ie.Op)
		require.Equal(t, "ipc", ie.Pkg)
		require.True(t, strings.HasPrefix(err.Error(), "ipc: receive "+typeName(e.typ)), err.Error())
		for _, s := range says {
			require.Contains(t, err.Error(), s)
		}
	}
}

// imports wants Receive to succeed and the import of what came to work.
func imports(t *testing.T, e *env, r *ipc.Received, err error) {
	t.Helper()
	require.NoError(t, err)
	require.Len(t, r.FDs(), 2)
	imp, err := ipc.Import(e.fx.m, r, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(6*mib), imp.Size())
	_, err = imp.WriteAt([]byte("hostile"), int64(6*mib-7))
	require.NoError(t, err)
	require.NoError(t, imp.Close())
}

// importRefused wants Receive to succeed and Import to fail with an error matching is and
// saying each of says (where %d is the first descriptor received).
func importRefused(is error, says ...string) func(*testing.T, *env, *ipc.Received, error) {
	return func(t *testing.T, e *env, r *ipc.Received, err error) {
		t.Helper()
		require.NoError(t, err)
		held := e.fx.s.Stats()
		imp, err := ipc.Import(e.fx.m, r, []int{0})
		require.ErrorIs(t, err, is)
		require.Nil(t, imp)
		for _, s := range says {
			if strings.Contains(s, "%d") {
				s = fmt.Sprintf(s, r.FDs()[0])
			}
			require.Contains(t, err.Error(), s)
		}
		after := e.fx.s.Stats()
		require.Equal(t, [4]int{held.Handles, held.Allocations, held.Reservations, held.Mappings},
			[4]int{after.Handles, after.Allocations, after.Reservations, after.Mappings}, "a failed import leaves nothing behind")
	}
}

// then runs first on the first Receive and next on a second one.
func then(first, next func(*testing.T, *env, *ipc.Received, error)) func(*testing.T, *env, *ipc.Received, error) {
	return func(t *testing.T, e *env, r *ipc.Received, err error) {
		t.Helper()
		first(t, e, r, err)
		if r != nil {
			require.NoError(t, r.Close())
		}
		r, err = ipc.Receive(e.z)
		next(t, e, r, err)
		if r != nil {
			require.NoError(t, r.Close())
		}
	}
}

// byType picks the expectation of the socket type.
func byType(stream, message func(*testing.T, *env, *ipc.Received, error)) func(*testing.T, *env, *ipc.Received, error) {
	return func(t *testing.T, e *env, r *ipc.Received, err error) {
		if e.typ == unix.SOCK_STREAM {
			stream(t, e, r, err)
		} else {
			message(t, e, r, err)
		}
	}
}

func hostileCases() []hostile {
	// sendWith sends b with the two CUDA descriptors.
	sendWith := func(b []byte) func(*testing.T, *env) {
		return func(t *testing.T, e *env) { e.send(t, b, e.fx.cuda...) }
	}
	return []hostile{
		// Malformed headers, with the descriptors they announce.
		{name: "bad magic", peer: sendWith(patch(valid(), 0, 'X')), want: refused(`bad magic "XUVMMIPC"`)},
		{name: "version 1", peer: sendWith(patch(valid(), 8, 1)), want: refused("version 1, want 2")},
		{name: "a dma-buf message", peer: sendWith(patch(valid(), 10, 2)), want: refused("a dma-buf message, where an allocations message was expected")},
		{name: "a kind of message of no kind", peer: sendWith(patch(valid(), 10, 9)), want: refused("message of kind 9")},
		{name: "no sizes", peer: sendWith(wire(2 * mib)), want: refused("0 descriptors (1 to 253)")},
		{name: "254 sizes", peer: sendWith(wire(2*mib, repeatSize(2*mib, 254)...)), want: refused()},
		{name: "reserved bytes", peer: sendWith(patch(valid(), 15, 1)), want: refused("reserved byte 15 is 0x01, want 0")},
		{name: "reserved bytes of the body", peer: sendWith(patch(valid(), 20, 1)), want: refused("reserved byte 20 is 0x01, want 0")},
		{name: "fabric handle type", peer: sendWith(patch(valid(), 16, byte(cu.MEM_HANDLE_TYPE_FABRIC))), want: refused("handle type")},
		{name: "granularity 0", peer: sendWith(wire(0, 2*mib, 4*mib)), want: refused("granularity 0")},
		{name: "granularity 3", peer: sendWith(wire(3, 3, 6)), want: refused("granularity 3 is not a power of two")},
		{name: "size 0", peer: sendWith(wire(2*mib, 0, 4*mib)), want: refused("size 0 of allocation 0")},
		{name: "size not a multiple of its granularity", peer: sendWith(wire(2*mib, 1*mib, 4*mib)), want: refused("size 1048576 of allocation 0")},
		{name: "sizes past 2^64", peer: sendWith(wire(2*mib, 1<<63, 1<<63)), want: refused("sizes overflow")},
		{name: "10 bytes", peer: sendWith(valid()[:10]), want: byType(refused("closed after 10 header bytes"), refused("10 bytes"))},
		{name: "fixed part only", peer: sendWith(valid()[:24]), want: byType(refused("closed after 24 header bytes"), refused("message of 24 bytes, want 48"))},
		{name: "trailing bytes", peer: sendWith(append(valid(), 1, 2, 3)),
			want: byType(then(imports, refused(`bad magic "\x01\x02\x03"`)), refused("message of 51 bytes, want 48"))},
		{name: "garbage longer than any header", peer: func(t *testing.T, e *env) {
			e.send(t, []byte(strings.Repeat("CUVMMIPx", 400)), e.fx.devnull())
		}, want: byType(refused(`bad magic "CUVMMIPx"`), refused("message longer than 2056 bytes"))},

		// Descriptor counts.
		{name: "one descriptor for two sizes", peer: func(t *testing.T, e *env) { e.send(t, valid(), e.fx.cuda[0]) },
			want: refused("1 descriptors for 2 allocations")},
		{name: "no descriptors", peer: func(t *testing.T, e *env) { e.send(t, valid()) }, want: refused("0 descriptors for 2 allocations")},
		{name: "three descriptors for two sizes", peer: func(t *testing.T, e *env) { e.send(t, valid(), append(e.fx.cuda, e.fx.devnull())...) },
			want: refused("3 descriptors", "more than the 2 allowed")},
		{name: "253 descriptors for one size", peer: func(t *testing.T, e *env) { e.send(t, wire(2*mib, 2*mib), repeat(e.fx.devnull(), 253)...) },
			want: refused("253 descriptors", "more than the 1 allowed")},
		{name: "253 descriptors for 253 sizes", peer: func(t *testing.T, e *env) {
			e.send(t, wire(2*mib, repeatSize(2*mib, 253)...), repeat(e.fx.devnull(), 253)...)
		}, want: func(t *testing.T, e *env, r *ipc.Received, err error) {
			require.NoError(t, err)
			require.Len(t, r.FDs(), 253)
		}},
		{name: "two control messages of descriptors", peer: func(t *testing.T, e *env) {
			require.NoError(t, rawSend(e.peer, valid(), append(unix.UnixRights(e.fx.cuda[0]), unix.UnixRights(e.fx.cuda[1])...)))
		}, want: imports},
		{name: "stream: descriptors after the count", types: []int{unix.SOCK_STREAM}, peer: func(t *testing.T, e *env) {
			b := valid()
			e.send(t, b[:30], e.fx.cuda...)
			e.send(t, b[30:31], e.fx.devnull())
			e.send(t, b[31:])
		}, want: func(t *testing.T, e *env, r *ipc.Received, err error) {
			refused("more descriptors than the 2 allowed, with 31 header bytes")(t, e, r, err)
			require.Equal(t, 17, unread(t, e.z), "Receive stops at the byte that brought the excess")
		}},
		{name: "stream: descriptors split over the header", types: []int{unix.SOCK_STREAM}, peer: func(t *testing.T, e *env) {
			b := valid()
			e.send(t, b[:5], e.fx.cuda[0])
			e.send(t, b[5:39])
			e.send(t, b[39:], e.fx.cuda[1])
		}, want: imports},

		// Descriptors that are not CUDA memory: received, refused by the driver on import.
		{name: "a pipe, /dev/null and a regular file", peer: func(t *testing.T, e *env) {
			e.send(t, wire(2*mib, 2*mib, 2*mib, 2*mib), int(e.fx.pipeR.Fd()), e.fx.devnull(), int(e.fx.file.Fd()))
		}, want: refused("the descriptor of allocation 0 is a pipe, not memory")},
		{name: "/dev/null and a regular file", peer: func(t *testing.T, e *env) {
			e.send(t, wire(2*mib, 2*mib, 2*mib), e.fx.devnull(), int(e.fx.file.Fd()))
		}, want: importRefused(cu.ERROR_UNKNOWN, "import allocation 0 (fd %d)")},
		{name: "CUDA memory and a directory", peer: func(t *testing.T, e *env) {
			d, err := os.Open(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			e.send(t, valid(), e.fx.cuda[0], int(d.Fd()))
		}, want: refused("the descriptor of allocation 1 is a directory, not memory")},
		{name: "a sealed memory file", peer: func(t *testing.T, e *env) {
			fd, err := unix.MemfdCreate("cuvmm-ticket-manifest", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
			require.NoError(t, err)
			t.Cleanup(func() { unix.Close(fd) })
			require.NoError(t, unix.Ftruncate(fd, 2*mib))
			_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE)
			require.NoError(t, err)
			e.send(t, wire(2*mib, 2*mib), fd)
		}, want: refused("the descriptor of allocation 0 is a sealed memory file, not memory")},
		{name: "a socket", peer: func(t *testing.T, e *env) {
			e.send(t, wire(2*mib, 2*mib), fileFD(t, e.peer))
		}, want: refused("the descriptor of allocation 0 is a socket, not memory")},
		{name: "a regular file alone", peer: func(t *testing.T, e *env) { e.send(t, wire(2*mib, 2*mib), int(e.fx.file.Fd())) },
			want: importRefused(cu.ERROR_UNKNOWN, "import allocation 0 (fd %d)")},
		{name: "CUDA memory, then a pipe", peer: func(t *testing.T, e *env) { e.send(t, valid(), e.fx.cuda[0], int(e.fx.pipeW.Fd())) },
			want: refused("the descriptor of allocation 1 is a pipe, not memory")},

		// One byte a write, each with descriptors.
		{name: "dribbled, 253 descriptors a byte", peer: func(t *testing.T, e *env) { e.dribble(t, valid(), e.fx.devnull(), 253) },
			want: byType(func(t *testing.T, e *env, r *ipc.Received, err error) {
				refused("more descriptors than the 253 allowed, with 2 header bytes")(t, e, r, err)
				require.Equal(t, 46, unread(t, e.z), "Receive stops at the second byte")
			}, refused("message of 1 bytes, shorter than any"))},
		{name: "dribbled, one descriptor a byte", peer: func(t *testing.T, e *env) { e.dribble(t, valid(), e.fx.devnull(), 1) },
			want: byType(func(t *testing.T, e *env, r *ipc.Received, err error) {
				refused("14 descriptors with 14 header bytes, more than the 2 allowed")(t, e, r, err)
				require.Equal(t, 34, unread(t, e.z), "Receive stops once the count says too many")
			}, refused("message of 1 bytes, shorter than any"))},
		{name: "dribbled, descriptors on the first byte", peer: func(t *testing.T, e *env) {
			b := valid()
			e.send(t, b[:1], e.fx.cuda...)
			e.dribble(t, b[1:], e.fx.devnull(), 0)
		}, want: byType(imports, refused("message of 1 bytes, shorter than any"))},

		// Claims the importer can check.
		{name: "a size past the device's memory", peer: sendWith(wire(2*mib, 64<<40, 4*mib)),
			want: importRefused(ipc.ErrProtocol, "allocation 0 (fd %d) claims 64TiB", "more than its 81079MiB of memory")},
		{name: "sizes past the device's memory together", peer: func(t *testing.T, e *env) {
			big := e.fx.totalMem &^ (2*mib - 1)
			e.send(t, wire(2*mib, big, 2*mib), e.fx.cuda...)
		}, want: importRefused(ipc.ErrProtocol, "allocation 1 (fd", "claims 2MiB, which makes 81080MiB on device 0")},
		{name: "a size larger than the allocation", peer: sendWith(wire(2*mib, 4*mib, 4*mib)),
			want: importRefused(cu.ERROR_NOT_SUPPORTED, "map allocation 0 (fd %d), claimed size 4MiB", "only whole allocations")},
		{name: "a size smaller than the allocation", peer: sendWith(wire(2*mib, 2*mib, 2*mib)),
			want: importRefused(cu.ERROR_NOT_SUPPORTED, "map allocation 1 (fd", "claimed size 2MiB", "only whole allocations")},
		{name: "a size misaligned to our granularity", peer: sendWith(wire(4096, 2*mib+4096, 4*mib)),
			want: importRefused(ipc.ErrProtocol, "allocation 0 (fd %d) claims 2052KiB, not a multiple of the granularity 2MiB of device 0")},
		{name: "a peer granularity smaller than ours", peer: sendWith(wire(4096, 2*mib, 4*mib)), want: imports},
		{name: "a peer granularity larger than any allocation", peer: sendWith(wire(1<<40, 1<<40, 1<<40)),
			want: importRefused(ipc.ErrProtocol, "allocation 0 (fd %d) claims 1TiB, which makes 1TiB on device 0")},

		// The peer goes away.
		{name: "closed before a message", types: []int{unix.SOCK_STREAM, unix.SOCK_SEQPACKET}, peer: func(*testing.T, *env) {},
			want: func(t *testing.T, e *env, r *ipc.Received, err error) {
				require.ErrorIs(t, err, io.EOF)
				require.Nil(t, r)
			}},

		// Zero-length messages: a stream drops them; a message socket delivers them.
		{name: "empty message with descriptors, then a valid one", peer: func(t *testing.T, e *env) {
			require.NoError(t, rawSend(e.peer, nil, unix.UnixRights(e.fx.devnull(), e.fx.devnull())))
			e.send(t, valid(), e.fx.cuda...)
		}, want: byType(imports, then(refused("empty message with 2 descriptors"), imports))},
		{name: "empty message, then a valid one", peer: func(t *testing.T, e *env) {
			require.NoError(t, rawSend(e.peer, nil, nil))
			e.send(t, valid(), e.fx.cuda...)
		}, want: byType(imports, then(refused("empty message"), imports))},

		// Control messages besides descriptors.
		{name: "credentials with the descriptors", peer: func(t *testing.T, e *env) {
			cred := unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
			require.NoError(t, rawSend(e.peer, valid(), append(cred, unix.UnixRights(e.fx.cuda...)...)))
		}, want: imports},
		{name: "SO_PASSCRED", setup: func(t *testing.T, e *env) { require.NoError(t, setsockopt(t, e.z, unix.SO_PASSCRED)) },
			peer: sendWith(valid()), want: imports},
		{name: "SO_PASSCRED, 253 descriptors", setup: func(t *testing.T, e *env) { require.NoError(t, setsockopt(t, e.z, unix.SO_PASSCRED)) },
			peer: func(t *testing.T, e *env) {
				e.send(t, wire(2*mib, repeatSize(2*mib, 253)...), repeat(e.fx.devnull(), 253)...)
			}, want: func(t *testing.T, e *env, r *ipc.Received, err error) {
				require.NoError(t, err)
				require.Len(t, r.FDs(), 253)
			}},
		{name: "SO_PASSCRED, 254 descriptors", setup: func(t *testing.T, e *env) {
			if e.typ == unix.SOCK_STREAM {
				// The 254th comes alone, in a read with room for the credentials only.
				requireExactControlRoom(t)
			}
			require.NoError(t, setsockopt(t, e.z, unix.SO_PASSCRED))
		},
			peer: func(t *testing.T, e *env) {
				b := wire(2*mib, repeatSize(2*mib, 253)...)
				e.send(t, b[:1], repeat(e.fx.devnull(), 253)...)
				e.send(t, b[1:], e.fx.devnull())
			}, want: byType(refused("more descriptors than the 253 allowed"), refused("message of 1 bytes, shorter than any"))},
		{name: "SO_PASSPIDFD", setup: func(t *testing.T, e *env) {
			if err := setsockopt(t, e.z, unix.SO_PASSPIDFD); err != nil {
				t.Skipf("no SO_PASSPIDFD: %v", err)
			}
		}, peer: sendWith(valid()), want: imports},
		{name: "SO_PASSPIDFD, more descriptors than announced", setup: func(t *testing.T, e *env) {
			if err := setsockopt(t, e.z, unix.SO_PASSPIDFD); err != nil {
				t.Skipf("no SO_PASSPIDFD: %v", err)
			}
		}, peer: func(t *testing.T, e *env) {
			e.send(t, valid(), append(e.fx.cuda, repeat(e.fx.devnull(), 7)...)...)
		}, want: refused("9 descriptors", "more than the 2 allowed")},
		{name: "SO_PASSPIDFD, more descriptors after the count", types: []int{unix.SOCK_STREAM}, setup: func(t *testing.T, e *env) {
			if err := setsockopt(t, e.z, unix.SO_PASSPIDFD); err != nil {
				t.Skipf("no SO_PASSPIDFD: %v", err)
			}
		}, peer: func(t *testing.T, e *env) {
			b := valid()
			e.send(t, b[:24], e.fx.cuda...)
			e.send(t, b[24:], repeat(e.fx.devnull(), 7)...)
		}, want: refused("more descriptors than the 2 allowed, with 48 header bytes")},
		{name: "SO_TIMESTAMP", setup: func(t *testing.T, e *env) { require.NoError(t, setsockopt(t, e.z, unix.SO_TIMESTAMP)) },
			peer: sendWith(valid()), want: byType(imports, refused("unexpected control message (level 1, type 29)"))},

		// Descriptors after a complete message belong to the next one.
		{name: "descriptors after the header", peer: func(t *testing.T, e *env) {
			e.send(t, valid(), e.fx.cuda...)
			e.send(t, []byte("X"), repeat(e.fx.devnull(), 3)...)
		}, want: then(imports, refused(`bad magic "X"`))},
	}
}

// exactControlRoom is whether a read leaves out the control messages it has no room for,
// with MSG_CTRUNC, as Linux does: the kernel discards a descriptor that does not fit. qemu-user
// 7.2 (Debian 12's) does not: it offers the kernel twice the room the program gave, so the
// kernel installs the descriptor, and when the program's room is exactly full it drops the
// rest of the control data without MSG_CTRUNC, leaving the descriptor open in the process and
// unknown to it. Receive cannot refuse what it is never shown. The probe closes what such a
// platform leaves open.
var exactControlRoom = sync.OnceValues(func() (bool, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.SetsockoptInt(fds[1], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		return false, err
	}
	// The sender passes its own socket: a copy of it found open after the read is the
	// descriptor the platform installed without saying so.
	if err := rawSendFD(fds[0], []byte{1}, unix.UnixRights(fds[0])); err != nil {
		return false, err
	}
	p, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	_, _, flags, _, err := unix.Recvmsg(fds[1], p, oob, 0)
	if err != nil {
		return false, err
	}
	var sent unix.Stat_t
	if err := unix.Fstat(fds[0], &sent); err != nil {
		return false, err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		var st unix.Stat_t
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd != fds[0] &&
			unix.Fstat(fd, &st) == nil && st.Dev == sent.Dev && st.Ino == sent.Ino {
			unix.Close(fd)
		}
	}
	return flags&unix.MSG_CTRUNC != 0, nil
})

// requireExactControlRoom skips the test where reads do not leave out control messages as
// Linux does (under qemu-user).
func requireExactControlRoom(t *testing.T) {
	t.Helper()
	exact, err := exactControlRoom()
	require.NoError(t, err)
	if !exact {
		t.Skip("this platform installs a descriptor that a read had no room for and does not say so " +
			"(qemu-user 7.2 offers the kernel twice the control room), so Receive cannot see an excess")
	}
}

func repeatSize(s uint64, n int) []uint64 {
	sizes := make([]uint64, n)
	for i := range sizes {
		sizes[i] = s
	}
	return sizes
}

func TestReceiveHostilePeer(t *testing.T) {
	for _, c := range hostileCases() {
		types := c.types
		if types == nil {
			types = socketTypes
		}
		for _, typ := range types {
			t.Run(c.name+"/"+typeName(typ), func(t *testing.T) {
				before := openFDs(t)
				fx := newFixture(t)
				a, z := socketpair(t, typ)
				var r *ipc.Received
				// Closed also when the case fails, so that later cases count right.
				t.Cleanup(func() {
					if r != nil {
						r.Close()
					}
					a.Close()
					z.Close()
					failed := t.Failed()
					fx.close(t)
					if !failed {
						requireOpenFDs(t, before, "descriptors left open")
					}
				})
				e := &env{typ: typ, fx: fx, peer: a, z: z}
				// A regression fails instead of hanging.
				require.NoError(t, z.SetDeadline(time.Now().Add(5*time.Second)))
				if c.setup != nil {
					c.setup(t, e)
				}
				c.peer(t, e)
				require.NoError(t, a.Close())
				r, err := ipc.Receive(z)
				c.want(t, e, r, err)
			})
		}
	}
}

// The receiver holds no more descriptors than the protocol allows at any moment: it fails
// at the read that brings one too many, before the peer has sent the rest of the header.
func TestReceiveStopsAtExcessDescriptors(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devnull.Close()
	dn := int(devnull.Fd())
	hdr := wire(2*mib, 2*mib, 2*mib)

	for _, c := range []struct {
		name  string
		first []byte // sent with the first descriptors, then the receiver is seen holding them
		held  int
		next  []byte // sent with one descriptor more
	}{
		{"before the count", hdr[:1], 253, hdr[1:2]},
		{"after the count", hdr[:24], 2, hdr[24:25]},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, z := socketpair(t, unix.SOCK_STREAM)
			defer a.Close()
			defer z.Close()
			before := openFDs(t)
			require.NoError(t, z.SetDeadline(time.Now().Add(5*time.Second)))
			type result struct {
				r   *ipc.Received
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := ipc.Receive(z)
				done <- result{r, err}
			}()
			require.NoError(t, rawSend(a, c.first, unix.UnixRights(repeat(dn, c.held)...)))
			require.Eventually(t, func() bool { return openFDs(t) == before+c.held }, 5*time.Second, time.Millisecond,
				"the receiver holds the first %d descriptors", c.held)
			select {
			case res := <-done:
				t.Fatalf("Receive returned early: %v", res.err)
			default:
			}
			require.NoError(t, rawSend(a, c.next, unix.UnixRights(dn)))
			res := <-done
			require.ErrorIs(t, res.err, ipc.ErrProtocol, "the header is not complete: only an excess check fails the receive now")
			require.Nil(t, res.r)
			requireOpenFDs(t, before, "every descriptor received is closed")
		})
	}
}

// reserveSpy records the alignment of every reservation.
type reserveSpy struct {
	*sim.Sim
	aligns []uint64
}

func (s *reserveSpy) Reserve(size, alignment uint64, hint cu.DevicePtr, flags uint64) (cu.DevicePtr, error) {
	s.aligns = append(s.aligns, alignment)
	return s.Sim.Reserve(size, alignment, hint, flags)
}

// The importer aligns to its own granularity whatever the peer says its granularity is.
func TestImportUsesOwnGranularity(t *testing.T) {
	for _, gran := range []uint64{4096, 64 << 10, 2 * mib} {
		t.Run(units.Size(gran), func(t *testing.T) {
			before := openFDs(t)
			s, err := sim.New(sim.PresetH100())
			require.NoError(t, err)
			spy := &reserveSpy{Sim: s}
			m := vmm.New(spy)
			a, err := m.Create(2*mib, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR})
			require.NoError(t, err)
			e, err := ipc.Export(m, a)
			require.NoError(t, err)
			h := ipc.Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: gran, Sizes: []uint64{2 * mib}}
			x, z := socketpair(t, unix.SOCK_SEQPACKET)
			require.NoError(t, ipc.SendFDs(x, h, e.FDs()))
			imp, err := ipc.ReceiveAndImport(z, m, nil)
			require.NoError(t, err)
			require.Equal(t, []uint64{2 * mib}, spy.aligns, "the reservation's alignment is the allocation's granularity")
			require.NoError(t, imp.Close())
			require.NoError(t, e.Close())
			require.NoError(t, a.Close())
			require.NoError(t, x.Close())
			require.NoError(t, z.Close())
			require.True(t, s.Stats().Clean())
			requireOpenFDs(t, before)
		})
	}
}

// fileFD is a descriptor of c, valid while c is open.
func fileFD(t *testing.T, c *net.UnixConn) int {
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	var fd int
	require.NoError(t, rc.Control(func(f uintptr) { fd = int(f) }))
	return fd
}
