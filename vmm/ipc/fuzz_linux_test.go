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
				if k := 32 + 8*int(binary.LittleEndian.Uint16(b[12:])); k <= len(b) {
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
		requireOpenFDs(t, before, "%s: descriptors left open", typeName(typ))
	}
}

// FuzzReceive runs Receive against a peer that writes data in chunks, each with a number
// of descriptors: plan holds (length, descriptors) pairs, and what data is left goes in a
// last write. Receive must return an error or a valid message, never hang, and leave no
// descriptor open once the message is closed.
func FuzzReceive(f *testing.F) {
	valid := wire(2*mib, 2*mib, 4*mib)
	for typ := range uint8(3) {
		f.Add(typ, valid, []byte{48, 2})
		f.Add(typ, valid, []byte{1, 2, 47, 0})
		f.Add(typ, valid, []byte{1, 253, 1, 253, 1, 253})
		f.Add(typ, valid, []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
		f.Add(typ, valid, []byte{30, 2, 1, 1, 9, 0})
		f.Add(typ, valid, []byte{0, 2, 48, 2})
		f.Add(typ, append(valid, valid...), []byte{48, 2, 48, 2})
		f.Add(typ, wire(2*mib, 1<<63, 1<<63), []byte{48, 2})
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
		requireOpenFDs(t, before, "descriptors left open")
	})
}

// FuzzImportClaims imports the fixture's exported allocations (2 MiB and 4 MiB) and
// descriptors that are no allocation (the null device, a pipe, a regular file) under
// claims of the fuzzer's: the header's granularity and sizes, and which descriptor goes
// with each size. Import succeeds exactly when every claim is true; when it fails it
// leaves nothing imported, reserved or mapped; and every descriptor is closed in the end.
func FuzzImportClaims(f *testing.F) {
	le := func(vs ...uint64) []byte {
		b := make([]byte, 8*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint64(b[8*i:], v)
		}
		return b
	}
	f.Add(uint64(2*mib), le(2*mib, 4*mib), []byte{0, 1})
	f.Add(uint64(2*mib), le(4*mib, 2*mib), []byte{0, 1})
	f.Add(uint64(2*mib), le(2*mib, 2*mib), []byte{0, 0})
	f.Add(uint64(2*mib), le(2*mib), []byte{2})
	f.Add(uint64(2*mib), le(2*mib), []byte{3})
	f.Add(uint64(4096), le(4096, 4*mib), []byte{0, 1})
	f.Add(uint64(2*mib), le(1<<40, 2*mib), []byte{1, 0})
	f.Add(uint64(2*mib), le(1<<63, 1<<63), []byte{1, 1})
	f.Add(uint64(1<<63), le(1<<63), []byte{0})
	f.Fuzz(func(t *testing.T, gran uint64, sizes, which []byte) {
		n := min(len(which), 4)
		if n == 0 {
			return
		}
		claims := make([]uint64, n)
		for i := range claims {
			var b [8]byte
			copy(b[:], sizes[min(8*i, len(sizes)):])
			claims[i] = binary.LittleEndian.Uint64(b[:])
		}
		before := openFDs(t)
		fx := newFixture(t)
		real := map[int]uint64{fx.cuda[0]: 2 * mib, fx.cuda[1]: 4 * mib}
		choices := []int{fx.cuda[0], fx.cuda[1], fx.devnull(), int(fx.file.Fd()), int(fx.pipeR.Fd())}
		fds := make([]int, n)
		truth := true // every descriptor is an allocation of the size claimed for it
		var total uint64
		for i := range fds {
			fds[i] = choices[int(which[i])%len(choices)]
			truth = truth && real[fds[i]] == claims[i]
			total += claims[i]
		}
		a, z := socketpair(t, unix.SOCK_SEQPACKET)
		require.NoError(t, rawSend(a, wire(gran, claims...), unix.UnixRights(fds...)))
		require.NoError(t, a.Close())
		require.NoError(t, z.SetDeadline(time.Now().Add(2*time.Second)))
		r, err := ipc.Receive(z)
		if err != nil {
			// Not a header (granularity, sizes): Receive's to refuse, and it did.
			require.ErrorIs(t, err, ipc.ErrProtocol)
		} else {
			held := fx.s.Stats()
			imp, err := ipc.Import(fx.m, r, nil)
			if truth {
				require.NoError(t, err, "claims %v of %v are true", claims, fds)
			}
			if err == nil {
				require.True(t, truth, "claims %v of %v imported", claims, fds)
				require.Equal(t, total, imp.Size())
				_, err = imp.WriteAt([]byte("claims"), int64(total-6))
				require.NoError(t, err)
				require.NoError(t, imp.Close())
			} else {
				require.Nil(t, imp)
				var ve *vmm.Error
				require.ErrorAs(t, err, &ve)
				require.Equal(t, "ipc", ve.Pkg)
				require.Equal(t, "import", ve.Op)
				after := fx.s.Stats()
				require.Equal(t, [4]int{held.Handles, held.Allocations, held.Reservations, held.Mappings},
					[4]int{after.Handles, after.Allocations, after.Reservations, after.Mappings}, "a failed import leaves nothing behind")
			}
			require.NoError(t, r.Close())
		}
		require.NoError(t, z.Close())
		fx.close(t)
		requireOpenFDs(t, before, "descriptors left open")
	})
}

// FuzzDmaBufReceive sends data as one dma-buf message with fds copies of a descriptor whose
// size is size (a sealed memfd named as sim names a dma-buf's, whose size lseek answers as a
// dma-buf's) over a seqpacket or stream
// socket. ReceiveDmaBuf must take the message exactly when the header decodes, exactly one
// descriptor came, and its size is the one the header claims; it must never hang, and no
// descriptor may stay open once the DmaBuf it returned is closed.
func FuzzDmaBufReceive(f *testing.F) {
	valid, _ := ipc.DmaBufHeader{Addr: 0x302000000, Size: 6 * mib, Device: 0, Chunks: 3}.MarshalBinary()
	for typ := range uint8(2) {
		f.Add(typ, valid, uint8(1), uint64(6*mib))
		f.Add(typ, valid, uint8(1), uint64(2*mib))
		f.Add(typ, valid, uint8(0), uint64(6*mib))
		f.Add(typ, valid, uint8(2), uint64(6*mib))
		f.Add(typ, valid[:20], uint8(1), uint64(6*mib))
		f.Add(typ, append(valid, 0), uint8(1), uint64(6*mib))
		f.Add(typ, []byte("CUVMMIPC\x01\x00\x01\x00"), uint8(1), uint64(4096))
		f.Add(typ, []byte{}, uint8(1), uint64(0))
	}
	f.Fuzz(func(t *testing.T, typ uint8, data []byte, fds uint8, size uint64) {
		if len(data) > 4096 {
			return // longer than a header: refused at its 49th byte whatever follows
		}
		st := []int{unix.SOCK_SEQPACKET, unix.SOCK_STREAM}[typ%2]
		n := int(fds % 4)
		if n > 1 {
			requireExactControlRoom(t) // else the excess descriptors cannot be seen
		}
		size %= 1 << 40 // a memfd is sparse: any size up to this costs nothing
		var want ipc.DmaBufHeader
		accept := want.UnmarshalBinary(data) == nil && n == 1 && want.Size == size
		if st == unix.SOCK_STREAM && len(data) > 56 {
			accept = false // the message is the first 56 bytes; the rest is the next one
			if want.UnmarshalBinary(data[:56]) == nil && n == 1 && want.Size == size {
				accept = true
			}
		}
		before := openFDs(t)
		// Named and sealed as sim's dma-bufs are, so that only what is fuzzed can refuse it.
		mfd, err := unix.MemfdCreate("cuvmm-sim.dmabuf:fuzz", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		require.NoError(t, err)
		require.NoError(t, unix.Ftruncate(mfd, int64(size)))
		_, err = unix.FcntlInt(uintptr(mfd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
		require.NoError(t, err)
		a, z := socketpair(t, st)
		var oob []byte
		if n > 0 {
			oob = unix.UnixRights(repeat(mfd, n)...)
		}
		sent := rawSend(a, data, oob) == nil
		require.NoError(t, unix.Close(mfd))
		require.NoError(t, a.Close())
		require.NoError(t, z.SetDeadline(time.Now().Add(2*time.Second)))
		d, err := ipc.ReceiveDmaBuf(z)
		if accept && sent {
			require.NoError(t, err)
			require.Equal(t, want.Addr, d.Addr)
			require.Equal(t, want.Size, d.Size)
			require.Equal(t, want.Device, d.Device)
			require.Equal(t, want.Chunks, d.Chunks)
			require.Equal(t, want.PCIe, d.PCIe)
			require.Equal(t, want.Generation, d.Generation)
			require.NoError(t, d.Close())
		} else {
			require.Error(t, err)
			require.Nil(t, d)
			require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "ReceiveDmaBuf waited for a peer that closed")
			var ie *vmm.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "receive dma-buf", ie.Op)
		}
		require.NoError(t, z.Close())
		requireOpenFDs(t, before, "descriptors left open")
	})
}
