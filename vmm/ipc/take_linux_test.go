package ipc

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"

	"github.com/cuvmm/cuvmm/vmm/ipc/internal/fds"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// take finds every descriptor the kernel wrote, also in control data it did not expect,
// and closes the pidfds.
func TestTakeControlMessages(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devnull.Close()
	fd := func() int {
		d, err := unix.Dup(int(devnull.Fd()))
		require.NoError(t, err)
		return d
	}
	isOpen := func(d int) bool {
		_, err := unix.FcntlInt(uintptr(d), unix.F_GETFD, 0)
		return err == nil
	}
	header := func(b []byte) *unix.Cmsghdr { return (*unix.Cmsghdr)(unsafe.Pointer(&b[0])) }
	msg := func(level, typ int32, data []byte) []byte {
		b := make([]byte, unix.CmsgSpace(len(data)))
		h := header(b)
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(len(data)))
		copy(b[unix.CmsgLen(0):], data)
		return b
	}
	creds := unix.UnixCredentials(&unix.Ucred{Pid: 1})
	timestamp := msg(unix.SOL_SOCKET, unix.SO_TIMESTAMP, make([]byte, 16))

	a, b, c := fd(), fd(), fd()
	// A truncated message: its length says 3 descriptors, the buffer holds 2.
	trunc := unix.UnixRights(b, c)
	header(trunc).SetLen(unix.CmsgLen(12))
	var r receiver
	err = r.take(append(append(append(creds, unix.UnixRights(a)...), timestamp...), trunc[:unix.CmsgLen(8)]...))
	require.ErrorIs(t, err, ErrProtocol)
	require.Contains(t, err.Error(), "unexpected control message (level 1, type 29)")
	require.Contains(t, err.Error(), "truncated")
	require.Equal(t, []int{a, b, c}, r.fds, "every descriptor found, before and after what was not expected")
	require.NoError(t, fds.Close(r.fds))

	// A pidfd is closed, not kept.
	p := fd()
	r = receiver{}
	require.NoError(t, r.take(append(creds, msg(unix.SOL_SOCKET, unix.SCM_PIDFD, binary.NativeEndian.AppendUint32(nil, uint32(p)))...)))
	require.Empty(t, r.fds)
	require.False(t, isOpen(p), "pidfd closed")

	// A length shorter than a header: what came before is kept, nothing after is guessed.
	d, e := fd(), fd()
	bad := msg(unix.SOL_SOCKET, unix.SCM_RIGHTS, binary.NativeEndian.AppendUint32(nil, uint32(e)))
	header(bad).SetLen(3)
	r = receiver{}
	err = r.take(append(unix.UnixRights(d), bad...))
	require.ErrorIs(t, err, ErrProtocol)
	require.Equal(t, []int{d}, r.fds)
	require.NoError(t, fds.Close(append(r.fds, e)))
}
