package fds

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/internal/fusetest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// within runs call and fails t if it has not returned after 10 s.
func within(t *testing.T, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still waiting on the FUSE file after 10 s", what)
		return nil
	}
}

// A FUSE file whose server no longer answers, taken from a peer as memory, as a dma-buf or
// as a ticket's manifest (whose seals Fetch asks first), is refused or taken at once:
// nothing waits on its file system.
func TestFUSEDescriptorsDoNotHang(t *testing.T) {
	fs := fusetest.Mount(t)
	fd := int(fs.Open(t, "file").Fd())
	fs.Stall(false)
	require.NoError(t, within(t, "Memory", func() error { return Memory(fd, 0) }), "a regular file may be memory: the import decides")
	err := within(t, "DmaBuf", func() error { return DmaBuf(fd) })
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "not a dma-buf")
	err = within(t, "Seals", func() error { _, err := Seals(fd); return err })
	require.Error(t, err, "no memory file: no seals")
	err = within(t, "Stat", func() error {
		st, err := Stat(fd)
		if err == nil && NotMemory(uint32(st.Mode)) != "" {
			err = errors.New("a regular file read as " + NotMemory(uint32(st.Mode)))
		}
		return err
	})
	require.NoError(t, err)
}

// A FUSE file named like a dma-buf, on a detached mount (so that /proc/self/fd shows it as
// "/dmabuf:x", as a dma-buf's), is refused as a dma-buf without asking its file system.
func TestDmaBufNamedFUSEFile(t *testing.T) {
	fs := fusetest.Mount(t)
	f := fs.Open(t, "dmabuf:x")
	fs.Detach(t)
	fs.Stall(false)
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	require.NoError(t, err)
	require.Equal(t, "/dmabuf:x", link, "the link a dma-buf has")
	err = within(t, "DmaBuf", func() error { return DmaBuf(int(f.Fd())) })
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "not a dma-buf")
}

// CloseForeign closes a memory file at once, and a FUSE file whose server answers no FLUSH
// without waiting for it.
func TestCloseForeign(t *testing.T) {
	fs := fusetest.Mount(t)
	f := fs.Open(t, "file")
	fs.Stall(true)
	fuse, err := unix.Dup(int(f.Fd()))
	require.NoError(t, err)
	memfd, err := unix.MemfdCreate("cuvmm-test", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	require.NoError(t, within(t, "CloseForeign", func() error { return CloseForeign([]int{fuse, memfd}) }))
	_, err = unix.FcntlInt(uintptr(memfd), unix.F_GETFD, 0)
	require.ErrorIs(t, err, unix.EBADF, "the memory file is closed when CloseForeign returns")
}
