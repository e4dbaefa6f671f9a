package ipc_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// envDmaBufChild makes the test binary the receiving child of the dma-buf cross-process
// test: a process that drives no GPU (a NIC's, say), receives a dma-buf and describes it.
// Its value is "sim" when the descriptor is sim's, which the child then reads back.
const envDmaBufChild = "CUVMM_IPC_DMABUF_CHILD"

func runDmaBufChildIfRequested() {
	kind := os.Getenv(envDmaBufChild)
	if kind == "" {
		return
	}
	if err := dmaBufChild(kind); err != nil {
		fmt.Fprintln(os.Stderr, "dma-buf child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// dmaBufChild receives a dma-buf on fd 3 and replies with what it found.
func dmaBufChild(kind string) error {
	c, err := net.FileConn(os.NewFile(3, "socket"))
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := ipc.ReceiveDmaBuf(c.(*net.UnixConn))
	if err != nil {
		return err
	}
	defer d.Close()
	msg := fmt.Sprintf("%v+%d device %d chunks %d", d.Addr, d.Size, d.Device, d.Chunks)
	switch kind {
	case "sim":
		info, err := sim.DmaBufInfo(d.FD())
		if err != nil {
			return err
		}
		msg += fmt.Sprintf("; sim: %v+%d device %d chunks %d", info.Addr, info.Size, info.Device, info.Chunks)
	default: // the kernel's: what the descriptor is
		link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", d.FD()))
		if err != nil {
			return err
		}
		msg += "; " + link
	}
	_, err = c.Write([]byte(msg))
	return err
}

// dmaBufBuffer is a buffer of three chunks, of memory made with props when given.
func dmaBufBuffer(t *testing.T, m *vmm.Manager, props ...vmm.Props) *buffer.Buffer {
	t.Helper()
	opts := buffer.Options{Policy: buffer.Exact}
	if len(props) > 0 {
		opts.Props = &props[0]
	}
	b, err := buffer.New(m, 2*mib, opts)
	require.NoError(t, err)
	require.NoError(t, b.Grow(4*mib))
	require.NoError(t, b.Grow(6*mib))
	return b
}

func TestDmaBufSendReceive(t *testing.T) {
	for _, typ := range []int{unix.SOCK_SEQPACKET, unix.SOCK_STREAM, unix.SOCK_DGRAM} {
		t.Run(fmt.Sprint(typ), func(t *testing.T) {
			before := openFDs(t)
			cfg := sim.PresetH100()
			cfg.Devices[0].DmaBufPCIe = true // so that the header's PCIe flag travels too
			s, err := sim.New(cfg)
			require.NoError(t, err)
			b := dmaBufBuffer(t, vmm.New(s))
			d, err := b.ExportDmaBuf(vmm.ViaPCIe())
			require.NoError(t, err)
			a, z := socketpair(t, typ)
			require.NoError(t, ipc.SendDmaBuf(a, d))
			require.NoError(t, d.Close(), "the sender's descriptor is its own")
			got, err := ipc.ReceiveDmaBuf(z)
			require.NoError(t, err)
			assert.Equal(t, b.Base(), got.Addr)
			assert.EqualValues(t, 6*mib, got.Size)
			assert.Equal(t, 0, got.Device)
			assert.Equal(t, 3, got.Chunks)
			assert.True(t, got.PCIe)
			info, err := sim.DmaBufInfo(got.FD())
			require.NoError(t, err)
			assert.Equal(t, 3, info.Chunks)
			require.NoError(t, got.Close())
			require.ErrorIs(t, ipc.SendDmaBuf(a, d), vmm.ErrClosed)
			// A zero DmaBuf holds no descriptor: nothing (not descriptor 0) is sent.
			require.ErrorIs(t, ipc.SendDmaBuf(a, &vmm.DmaBuf{Size: 4096}), vmm.ErrClosed)
			require.NoError(t, b.Close())
			require.NoError(t, a.Close())
			require.NoError(t, z.Close())
			require.True(t, s.Stats().Clean())
			requireOpenFDs(t, before, "descriptors leaked")
		})
	}
}

// A process that drives no GPU receives the dma-buf and reads what it describes.
func TestDmaBufCrossProcess(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	b := dmaBufBuffer(t, vmm.New(s))
	defer b.Close()
	got := dmaBufCrossProcess(t, b, "sim")
	want := fmt.Sprintf("%v+%d device 0 chunks 3", b.Base(), 6*mib)
	assert.Equal(t, want+"; sim: "+want, got)
}

// dmaBufCrossProcess exports b, sends it to a re-executed test binary and returns its
// reply.
func dmaBufCrossProcess(t *testing.T, b *buffer.Buffer, kind string) string {
	before := openFDs(t)
	defer func() { requireOpenFDs(t, before, "descriptors leaked") }()
	d, err := b.ExportDmaBuf()
	require.NoError(t, err)
	defer d.Close()
	a, z := socketpair(t, unix.SOCK_SEQPACKET)
	defer a.Close()
	wait := startChild(t, envDmaBufChild, kind, z)
	require.NoError(t, ipc.SendDmaBuf(a, d))
	reply := make([]byte, 512)
	n, rerr := a.Read(reply)
	out, werr := wait()
	require.NoError(t, werr, "child: %s", out)
	require.NoError(t, rerr)
	return string(reply[:n])
}

// A peer's message is not trusted: whatever is wrong with it, every descriptor that came
// is closed and the error is ErrProtocol.
func TestDmaBufReceiveRejects(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	b := dmaBufBuffer(t, vmm.New(s))
	defer b.Close()
	d, err := b.ExportDmaBuf()
	require.NoError(t, err)
	defer d.Close()
	good := ipc.DmaBufHeader{Addr: d.Addr, Size: d.Size, Chunks: 3}
	msg, err := good.MarshalBinary()
	require.NoError(t, err)
	memfd, err := unix.MemfdCreate("not-a-dma-buf", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(memfd)
	// A directory: on ext4 lseek to its end answers 2^63-1, which a header may claim.
	d0, err := os.Open(t.TempDir())
	require.NoError(t, err)
	defer d0.Close()
	dir := int(d0.Fd())
	// Named as sim names a dma-buf's memfd, but not sealed; sealed, of another size; and
	// sealed, of the header's size, but holding data (a ticket's manifest, say, which a
	// peer could leave here for a forged ticket to name).
	simLike := func(seal bool, data []byte) int {
		fd, err := unix.MemfdCreate("cuvmm-sim.dmabuf:forged", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Close(fd) })
		require.NoError(t, unix.Ftruncate(fd, 4096))
		if data != nil {
			require.NoError(t, unix.Ftruncate(fd, int64(d.Size)))
			_, err = unix.Pwrite(fd, data, 0)
			require.NoError(t, err)
		}
		if seal {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
			require.NoError(t, err)
		}
		return fd
	}
	unsealed, sealed, written := simLike(false, nil), simLike(true, nil), simLike(true, []byte("a manifest"))
	var pipe [2]int
	require.NoError(t, unix.Pipe2(pipe[:], unix.O_CLOEXEC))
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	with := func(b []byte, at int, v byte) []byte {
		c := bytes.Clone(b)
		c[at] = v
		return c
	}
	for _, c := range []struct {
		name string
		typ  int
		msg  []byte
		fds  []int
		says string
	}{
		{"no-descriptor", unix.SOCK_SEQPACKET, msg, nil, "0 descriptors with a dma-buf header, want 1"},
		{"two-descriptors", unix.SOCK_SEQPACKET, msg, []int{d.FD(), d.FD()}, "more descriptors than the 1 allowed"},
		{"two-descriptors-stream", unix.SOCK_STREAM, msg, []int{d.FD(), d.FD()}, "more descriptors than the 1 allowed"},
		{"bad-magic", unix.SOCK_SEQPACKET, with(msg, 0, 'X'), []int{d.FD()}, `bad magic "XUVMMIPC"`},
		{"an-allocations-message", unix.SOCK_SEQPACKET, with(msg, 10, 1), []int{d.FD()}, "an allocations message, where a dma-buf message was expected"},
		{"two-counted", unix.SOCK_SEQPACKET, with(msg, 12, 2), []int{d.FD()}, "2 descriptors in a dma-buf message, want 1"},
		{"version", unix.SOCK_SEQPACKET, with(msg, 8, 1), []int{d.FD()}, "version 1, want 2"},
		{"flags", unix.SOCK_SEQPACKET, with(msg, 16, 2), []int{d.FD()}, "unknown dma-buf flags"},
		{"reserved", unix.SOCK_SEQPACKET, with(msg, 29, 1), []int{d.FD()}, "reserved byte 29 is 0x01"},
		{"short", unix.SOCK_SEQPACKET, msg[:40], []int{d.FD()}, "message of 40 bytes, want 56"},
		{"long", unix.SOCK_SEQPACKET, append(bytes.Clone(msg), 0), []int{d.FD()}, "message of 57 bytes, want 56"},
		{"size-0", unix.SOCK_SEQPACKET, with(msg, 42, 0), []int{d.FD()}, "size 0"},
		{"size-lies", unix.SOCK_SEQPACKET, with(msg, 41, 0x10), []int{d.FD()}, "the descriptor's size is 6291456, the header says"},
		{"a-pipe", unix.SOCK_SEQPACKET, msg, []int{pipe[0]}, "the descriptor is a pipe, not a dma-buf"},
		{"a-directory", unix.SOCK_SEQPACKET, msg, []int{dir}, "the descriptor is a directory, not a dma-buf"},
		{"a-memfd", unix.SOCK_SEQPACKET, msg, []int{memfd}, "the descriptor is not a dma-buf"},
		{"unsealed", unix.SOCK_SEQPACKET, msg, []int{unsealed}, "the descriptor is not a dma-buf"},
		{"sealed-size-lies", unix.SOCK_SEQPACKET, msg, []int{sealed}, "the descriptor's size is 4096, the header says"},
		{"sealed-with-data", unix.SOCK_SEQPACKET, msg, []int{written}, "the descriptor is not a dma-buf"},
		{"closed-stream", unix.SOCK_STREAM, msg[:20], []int{d.FD()}, "connection closed after 20 header bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.fds) > 1 {
				requireExactControlRoom(t)
			}
			before := openFDs(t)
			a, z := socketpair(t, c.typ)
			var oob []byte
			if c.fds != nil {
				oob = unix.UnixRights(c.fds...)
			}
			_, _, err := a.WriteMsgUnix(c.msg, oob, nil)
			require.NoError(t, err)
			if c.typ == unix.SOCK_STREAM {
				require.NoError(t, a.CloseWrite())
			}
			got, err := ipc.ReceiveDmaBuf(z)
			assert.Nil(t, got)
			require.ErrorIs(t, err, ipc.ErrProtocol)
			assert.ErrorContains(t, err, c.says)
			assert.True(t, strings.HasPrefix(err.Error(), "ipc: receive dma-buf "), err.Error())
			require.NoError(t, a.Close())
			require.NoError(t, z.Close())
			requireOpenFDs(t, before, "descriptors left open")
		})
	}

	// A dma-buf message is not an allocation's: Receive refuses it, closing the descriptor.
	before := openFDs(t)
	a, z := socketpair(t, unix.SOCK_SEQPACKET)
	require.NoError(t, ipc.SendDmaBuf(a, d))
	_, err = ipc.Receive(z)
	require.ErrorIs(t, err, ipc.ErrProtocol)
	require.NoError(t, a.Close())
	require.NoError(t, z.Close())
	requireOpenFDs(t, before)

	_, err = ipc.ReceiveDmaBuf(nil)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorIs(t, ipc.SendDmaBuf(nil, d), vmm.ErrInvalid)
	require.ErrorIs(t, ipc.SendDmaBuf(a, nil), vmm.ErrInvalid)
}
