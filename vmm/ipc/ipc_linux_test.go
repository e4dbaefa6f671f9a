package ipc_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// envChild makes the test binary the importing child of TestCrossProcess; its value is the
// backend ("sim" or "cuda").
const envChild = "CUVMM_IPC_TEST_CHILD"

const (
	seed  = 42
	reply = 43
)

func openBackend(name string) (vmm.Backend, error) {
	if name == "cuda" {
		return vmm.CUDA()
	}
	return sim.New(sim.PresetH100())
}

func runChildIfRequested() {
	name := os.Getenv(envChild)
	if name == "" {
		return
	}
	if err := child(name); err != nil {
		fmt.Fprintln(os.Stderr, "ipc child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child receives the parent's memory on fd 3, checks its bytes and writes a reply.
func child(backend string) error {
	b, err := openBackend(backend)
	if err != nil {
		return err
	}
	c, err := net.FileConn(os.NewFile(3, "socket"))
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := ipc.Receive(c.(*net.UnixConn))
	if err != nil {
		return err
	}
	fds := r.FDs()
	imp, err := ipc.Import(vmm.New(b), r, []int{0})
	if cerr := r.Close(); cerr != nil || err != nil {
		return errors.Join(err, cerr)
	}
	// The received descriptors are closed (checked before anything can reuse the numbers).
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			return fmt.Errorf("received descriptor %d still open (%v)", fd, err)
		}
	}
	defer imp.Close()
	got := make([]byte, imp.Size())
	if _, err := imp.ReadAt(got, 0); err != nil {
		return err
	}
	if want := vmmtest.Pattern(seed, len(got)); !bytes.Equal(want, got) {
		return fmt.Errorf("the parent's %d bytes differ", len(got))
	}
	_, err = imp.WriteAt(vmmtest.Pattern(reply, 4096), int64(imp.Size())-4096)
	if err == nil {
		_, err = c.Write([]byte("done"))
	}
	return err
}

// openFDs counts the open descriptors. It first starts Go's network poller (an epoll and
// an eventfd it keeps for the life of the process) so that counts taken before and after
// the first socket of the process compare.
func openFDs(t *testing.T) int {
	if pr, pw, err := os.Pipe(); err == nil {
		pr.Close()
		pw.Close()
	}
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// requireOpenFDs waits, 5 s at most, until n descriptors are open: a peer's descriptor that
// is neither memory nor a dma-buf (/dev/null, a pipe) is closed on a goroutine of its own
// (fds.CloseForeign), which may not have run yet.
func requireOpenFDs(t *testing.T, n int, msgAndArgs ...any) {
	t.Helper()
	got := openFDs(t)
	for end := time.Now().Add(5 * time.Second); got != n && time.Now().Before(end); got = openFDs(t) {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, n, got, msgAndArgs...)
}

func socketpair(t *testing.T, typ int) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socket")
		c, err := net.FileConn(f)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// shareable is a growable buffer whose chunks can be exported, filled with vmmtest.Pattern(seed).
func shareable(t *testing.T, m *vmm.Manager) *buffer.Buffer {
	t.Helper()
	props := vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
	b, err := buffer.New(m, 2*mib, buffer.Options{Props: &props, Policy: buffer.Exact})
	require.NoError(t, err)
	require.NoError(t, b.Grow(6*mib))
	require.NoError(t, b.Grow(8*mib))
	_, err = b.WriteAt(vmmtest.Pattern(seed, int(b.Size())), 0)
	require.NoError(t, err)
	return b
}

// exportBuffer exports b's chunks: each retained by its address, exported, and closed
// (the descriptor keeps the memory exportable; the buffer keeps it alive).
func exportBuffer(t *testing.T, m *vmm.Manager, b *buffer.Buffer) *ipc.Exported {
	t.Helper()
	allocs := retainChunks(t, m, b)
	e, err := ipc.Export(m, allocs...)
	require.NoError(t, err)
	closeAll(t, allocs)
	return e
}

// retainChunks returns an allocation for each of b's chunks.
func retainChunks(t *testing.T, m *vmm.Manager, b *buffer.Buffer) []*vmm.Allocation {
	t.Helper()
	var allocs []*vmm.Allocation
	for _, c := range b.Chunks() {
		a, err := m.Retain(b.Base() + cu.DevicePtr(c.Offset))
		require.NoError(t, err)
		require.Equal(t, c.Size, a.Size())
		allocs = append(allocs, a)
	}
	return allocs
}

func closeAll(t *testing.T, allocs []*vmm.Allocation) {
	t.Helper()
	for _, a := range allocs {
		require.NoError(t, a.Close())
	}
}

func TestSendReceiveInProcess(t *testing.T) {
	for _, typ := range []int{unix.SOCK_SEQPACKET, unix.SOCK_STREAM} {
		t.Run(fmt.Sprint(typ), func(t *testing.T) {
			before := openFDs(t)
			s, err := sim.New(sim.PresetH100())
			require.NoError(t, err)
			m := vmm.New(s)
			b := shareable(t, m)
			e := exportBuffer(t, m, b)
			require.Equal(t, []uint64{2 * mib, 4 * mib, 2 * mib}, e.Header.Sizes)
			a, z := socketpair(t, typ)
			require.NoError(t, ipc.Send(a, e))
			require.NoError(t, e.Close(), "the sender's descriptors are its own to close")
			require.NoError(t, e.Close())
			r, err := ipc.Receive(z)
			require.NoError(t, err)
			require.Len(t, r.FDs(), 3)
			imp, err := ipc.Import(m, r, []int{0})
			require.NoError(t, err)
			require.NoError(t, r.Close())
			got := make([]byte, imp.Size())
			_, err = imp.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, vmmtest.Pattern(seed, int(8*mib)), got)
			_, err = imp.ReadAt(got[:1], int64(imp.Size()))
			require.ErrorIs(t, err, vmm.ErrOutOfRange)
			require.NoError(t, imp.Close())
			require.NoError(t, b.Close())
			require.NoError(t, a.Close())
			require.NoError(t, z.Close())
			require.True(t, s.Stats().Clean(), "%+v", s.Stats())
			requireOpenFDs(t, before, "descriptors leaked")
		})
	}
}

// Malformed messages: every descriptor that arrived is closed.
func TestReceiveRejectsAndCloses(t *testing.T) {
	before := openFDs(t)
	a, z := socketpair(t, unix.SOCK_SEQPACKET)
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	fd := int(devnull.Fd())
	good := ipc.Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: 2 * mib, Sizes: []uint64{2 * mib, 2 * mib}}
	hdr, err := good.MarshalBinary()
	require.NoError(t, err)
	cases := []struct {
		name string
		msg  []byte
		fds  []int
	}{
		{"garbage", []byte("hello, this is not a header at all"), []int{fd}},
		{"too few descriptors", hdr, []int{fd}},
		{"too many descriptors", hdr, []int{fd, fd, fd}},
		{"no descriptors", hdr, nil},
		{"short", hdr[:10], []int{fd, fd}},
		{"trailing bytes", append(append([]byte(nil), hdr...), 1, 2, 3), []int{fd, fd}},
	}
	for _, c := range cases {
		var oob []byte
		if c.fds != nil {
			oob = unix.UnixRights(c.fds...)
		}
		_, _, err := a.WriteMsgUnix(c.msg, oob, nil)
		require.NoError(t, err, c.name)
		mid := openFDs(t)
		r, err := ipc.Receive(z)
		require.ErrorIs(t, err, ipc.ErrProtocol, c.name)
		require.Nil(t, r)
		requireOpenFDs(t, mid, "%s: received descriptors closed", c.name)
	}
	// More descriptors than a message may carry are refused by the sender's kernel or
	// truncated (MSG_CTRUNC) at the receiver; either way nothing leaks.
	many := make([]int, 300)
	for i := range many {
		many[i] = fd
	}
	if _, _, err := a.WriteMsgUnix(hdr, unix.UnixRights(many...), nil); err == nil {
		_, err := ipc.Receive(z)
		require.Error(t, err)
	}
	// A closed peer.
	require.NoError(t, a.Close())
	_, err = ipc.Receive(z)
	require.Error(t, err)
	require.NoError(t, z.Close())
	require.NoError(t, devnull.Close())
	requireOpenFDs(t, before)

	require.ErrorIs(t, ipc.SendFDs(nil, good, nil), vmm.ErrInvalid)
	_, err = ipc.Receive(nil)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorIs(t, ipc.Send(nil, nil), vmm.ErrInvalid)
}

// Import failures release what they imported and reserved.
func TestImportFaultInjection(t *testing.T) {
	for _, op := range []sim.Op{sim.OpImportFD, sim.OpProperties, sim.OpGranularity, sim.OpDevice, sim.OpReserve, sim.OpMap, sim.OpSetAccess} {
		for n := 1; n <= 3; n++ {
			before := openFDs(t)
			s, err := sim.New(sim.PresetH100())
			require.NoError(t, err)
			m := vmm.New(s)
			b := shareable(t, m)
			e := exportBuffer(t, m, b)
			a, z := socketpair(t, unix.SOCK_SEQPACKET)
			require.NoError(t, ipc.Send(a, e))
			held := s.Stats()
			require.NoError(t, s.FailNth(op, n, cu.ERROR_INVALID_VALUE))
			imp, err := ipc.ReceiveAndImport(z, m, []int{0})
			s.ClearFaults()
			if err != nil {
				require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
				after := s.Stats()
				require.Equal(t, [4]int{held.Handles, held.Reservations, held.Mappings, held.Allocations},
					[4]int{after.Handles, after.Reservations, after.Mappings, after.Allocations}, "%s#%d", op, n)
			} else {
				require.NoError(t, imp.Close())
			}
			require.NoError(t, e.Close())
			require.NoError(t, b.Close())
			require.NoError(t, a.Close())
			require.NoError(t, z.Close())
			require.True(t, s.Stats().Clean())
			requireOpenFDs(t, before, "%s#%d: descriptors leaked", op, n)
		}
	}
	// Export failures close the descriptors already made.
	for _, op := range []sim.Op{sim.OpProperties, sim.OpGranularity, sim.OpExportFD} {
		for n := 1; n <= 3; n++ {
			before := openFDs(t)
			s, _ := sim.New(sim.PresetH100())
			m := vmm.New(s)
			b := shareable(t, m)
			allocs := retainChunks(t, m, b)
			require.NoError(t, s.FailNth(op, n, cu.ERROR_INVALID_VALUE))
			e, err := ipc.Export(m, allocs...)
			s.ClearFaults()
			if err != nil {
				require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
				require.Nil(t, e)
			} else {
				require.NoError(t, e.Close())
			}
			closeAll(t, allocs)
			require.NoError(t, b.Close())
			require.True(t, s.Stats().Clean())
			requireOpenFDs(t, before, "%s#%d: descriptors leaked", op, n)
		}
	}

	// A Close that failed is retried by the next.
	for _, op := range []sim.Op{sim.OpUnmap, sim.OpFree, sim.OpRelease} {
		s, _ := sim.New(sim.PresetH100())
		m := vmm.New(s)
		b := shareable(t, m)
		e := exportBuffer(t, m, b)
		a, z := socketpair(t, unix.SOCK_SEQPACKET)
		require.NoError(t, ipc.Send(a, e))
		imp, err := ipc.ReceiveAndImport(z, m, nil)
		require.NoError(t, err)
		require.NoError(t, s.FailNth(op, 1, cu.ERROR_INVALID_VALUE))
		require.ErrorIs(t, imp.Close(), cu.ERROR_INVALID_VALUE, op)
		require.NoError(t, imp.Close(), op)
		_, err = imp.ReadAt(make([]byte, 1), 0)
		require.ErrorIs(t, err, vmm.ErrClosed)
		require.NoError(t, e.Close())
		require.NoError(t, b.Close())
		require.NoError(t, a.Close())
		require.NoError(t, z.Close())
		require.True(t, s.Stats().Clean(), op)
	}
}

// startChild re-executes the test binary with env=value and z as its descriptor 3 (this
// process's z is closed); wait waits for the child and returns what it printed.
func startChild(t *testing.T, env, value string, z *net.UnixConn) (wait func() (string, error)) {
	t.Helper()
	zf, err := z.File()
	require.NoError(t, err)
	require.NoError(t, z.Close())
	cmd := reexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.ExtraFiles = []*os.File{zf} // fd 3 in the child
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	require.NoError(t, zf.Close())
	return func() (string, error) {
		err := cmd.Wait()
		return out.String(), err
	}
}

// crossProcess exports a buffer, sends it to a re-executed test binary that imports it,
// checks its bytes and writes a reply, and checks the reply. Descriptors are counted once
// the driver is fully up (the real one opens a few dozen when it creates a context).
func crossProcess(t *testing.T, backend string, be vmm.Backend) {
	m := vmm.New(be)
	b := shareable(t, m)
	defer b.Close()
	before := openFDs(t)
	func() {
		e := exportBuffer(t, m, b)
		defer e.Close()
		a, z := socketpair(t, unix.SOCK_SEQPACKET)
		defer a.Close()
		wait := startChild(t, envChild, backend, z)
		require.NoError(t, ipc.Send(a, e))
		done := make([]byte, 4)
		n, rerr := a.Read(done)
		out, werr := wait()
		require.NoError(t, werr, "child: %s", out)
		require.NoError(t, rerr)
		require.Equal(t, "done", string(done[:n]))
	}()
	requireOpenFDs(t, before, "descriptors leaked")
	got := make([]byte, 4096)
	_, err := b.ReadAt(got, int64(b.Size())-4096)
	require.NoError(t, err)
	require.Equal(t, vmmtest.Pattern(reply, 4096), got, "the child's write shows in the parent's memory")
}

func TestCrossProcess(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	crossProcess(t, "sim", s)
	require.True(t, s.Stats().Clean())
}
