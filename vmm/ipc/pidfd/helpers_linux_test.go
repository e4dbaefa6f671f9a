package pidfd_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const (
	mib   = 1 << 20
	seed  = 42
	reply = 43
)

func TestMain(m *testing.M) {
	runPidfdChildIfRequested()
	os.Exit(m.Run())
}

func openBackend(name string) (vmm.Backend, error) {
	if name == "cuda" {
		return vmm.CUDA()
	}
	return sim.New(sim.PresetH100())
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
	var allocs []*vmm.Allocation
	for _, c := range b.Chunks() {
		a, err := m.Retain(b.Base() + cu.DevicePtr(c.Offset))
		require.NoError(t, err)
		allocs = append(allocs, a)
	}
	e, err := ipc.Export(m, allocs...)
	require.NoError(t, err)
	for _, a := range allocs {
		require.NoError(t, a.Close())
	}
	return e
}

// fixture is an export of two sim allocations (2 and 4 MiB) and descriptors that are not
// CUDA memory.
type fixture struct {
	s                   *sim.Sim
	m                   *vmm.Manager
	allocs              []*vmm.Allocation
	e                   *ipc.Exported
	cuda                []int // the exported descriptors
	pipeR, pipeW, devnl *os.File
	file                *os.File
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
