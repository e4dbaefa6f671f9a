package ipc_test

import (
	"encoding/binary"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fuzzNull is the descriptor the fuzz targets send, open for the life of the process so
// that the descriptor counts of one run compare.
var fuzzNull = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		panic(err)
	}
	return f
})

// receiverAgrees sends b as one message over a seqpacket and a stream socket, with as
// many descriptors as it announces, and checks that Receive decides as UnmarshalBinary
// did: on the seqpacket socket for b, on the stream for the header b starts with (what
// follows belongs to the next message).
func receiverAgrees(t *testing.T, b []byte, h ipc.Header, decodeErr error) {
	if len(b) > 4096 {
		return // no header is this long; the decoder alone covers such inputs
	}
	null := int(fuzzNull().Fd())
	n := 1
	if len(b) >= 14 {
		n = min(max(int(binary.LittleEndian.Uint16(b[12:])), 1), ipc.MaxDescriptors)
	}
	for _, typ := range []int{unix.SOCK_SEQPACKET, unix.SOCK_STREAM} {
		accept, want := decodeErr == nil, h
		if typ == unix.SOCK_STREAM {
			accept = false
			if len(b) >= 14 {
				if k := 24 + 8*int(binary.LittleEndian.Uint16(b[12:])); k <= len(b) {
					accept = want.UnmarshalBinary(b[:k]) == nil
				}
			}
		}
		before := openFDs(t)
		a, z := socketpair(t, typ)
		require.NoError(t, rawSend(a, b, unix.UnixRights(repeat(null, n)...)))
		require.NoError(t, a.Close())
		require.NoError(t, z.SetDeadline(time.Now().Add(2*time.Second)))
		r, err := ipc.Receive(z)
		if accept {
			require.NoError(t, err, "%s: UnmarshalBinary accepts the header", typeName(typ))
			require.Equal(t, want, r.Header)
			require.Len(t, r.FDs(), n)
		} else {
			require.Error(t, err, "%s: UnmarshalBinary refuses the header", typeName(typ))
			require.NotErrorIs(t, err, os.ErrDeadlineExceeded)
			require.Nil(t, r)
		}
		if r != nil {
			require.NoError(t, r.Close())
		}
		require.NoError(t, z.Close())
		require.Equal(t, before, openFDs(t), "%s: descriptors left open", typeName(typ))
	}
}

// FuzzReceive runs Receive against a peer that writes data in chunks, each with a number
// of descriptors: plan holds (length, descriptors) pairs, and what data is left goes in a
// last write. Receive must return an error or a valid message, never hang, and leave no
// descriptor open once the message is closed.
func FuzzReceive(f *testing.F) {
	valid := wire(2*mib, 2*mib, 4*mib)
	for typ := range uint8(3) {
		f.Add(typ, valid, []byte{40, 2})
		f.Add(typ, valid, []byte{1, 2, 39, 0})
		f.Add(typ, valid, []byte{1, 253, 1, 253, 1, 253})
		f.Add(typ, valid, []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
		f.Add(typ, valid, []byte{30, 2, 1, 1, 9, 0})
		f.Add(typ, valid, []byte{0, 2, 40, 2})
		f.Add(typ, append(valid, valid...), []byte{40, 2, 40, 2})
		f.Add(typ, wire(2*mib, 1<<63, 1<<63), []byte{40, 2})
		f.Add(typ, valid[:10], []byte{10, 5})
		f.Add(typ, []byte("CUVMMIPx"), []byte{8, 253})
		f.Add(typ, []byte{}, []byte{0, 3})
	}
	f.Fuzz(func(t *testing.T, typ uint8, data, plan []byte) {
		if len(data) > 4096 || len(plan) > 64 {
			return // longer than any header and more writes than bytes: nothing new
		}
		st := socketTypes[int(typ)%len(socketTypes)]
		null := int(fuzzNull().Fd())
		before := openFDs(t)
		a, z := socketpair(t, st)
		sent := 0
		write := func(p []byte, fds int) {
			var oob []byte
			if fds > 0 {
				oob = unix.UnixRights(repeat(null, fds)...)
			}
			// A write the kernel refuses (a full queue) is not the receiver's concern.
			if rawSend(a, p, oob) == nil {
				sent++
			}
		}
		rest := data
		for i := 0; i+1 < len(plan); i += 2 {
			n := min(int(plan[i]), len(rest))
			write(rest[:n], int(plan[i+1])%(ipc.MaxDescriptors+1))
			rest = rest[n:]
		}
		if len(rest) > 0 {
			write(rest, 0)
		}
		require.NoError(t, a.Close())
		if st == unix.SOCK_DGRAM && sent == 0 {
			// A datagram socket has no end of file: Receive would wait for its deadline.
			require.NoError(t, z.Close())
			return
		}
		require.NoError(t, z.SetDeadline(time.Now().Add(2*time.Second)))
		r, err := ipc.Receive(z)
		if err != nil {
			require.Nil(t, r)
			require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "Receive waited for a peer that closed")
			var ie *vmm.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "receive", ie.Op)
			require.Equal(t, "ipc", ie.Pkg)
		} else {
			again, err := r.Header.MarshalBinary()
			require.NoError(t, err)
			var h ipc.Header
			require.NoError(t, h.UnmarshalBinary(again))
			fds := r.FDs()
			require.Len(t, fds, len(r.Header.Sizes))
			for _, fd := range fds {
				_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
				require.NoError(t, err, "received descriptor %d is open", fd)
			}
			require.NoError(t, r.Close())
		}
		require.NoError(t, z.Close())
		require.Equal(t, before, openFDs(t), "descriptors left open")
	})
}
