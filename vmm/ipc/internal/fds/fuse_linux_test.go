package fds

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// stallFS is a FUSE file system of one regular file whose server stops answering GETATTR
// when hang is set: an fstat of the file then blocks until the connection is aborted.
type stallFS struct {
	dev  int
	hang atomic.Bool
}

func (s *stallFS) reply(unique uint64, errno int32, body []byte) {
	b := make([]byte, 16+len(body))
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)))
	binary.LittleEndian.PutUint32(b[4:], uint32(errno))
	binary.LittleEndian.PutUint64(b[8:], unique)
	copy(b[16:], body)
	unix.Write(s.dev, b)
}

func attr(ino uint64, mode uint32) []byte {
	b := make([]byte, 88)
	le := binary.LittleEndian
	le.PutUint64(b[0:], ino)
	le.PutUint32(b[60:], mode) // mode after 6 u64 + 3 u32
	le.PutUint32(b[64:], 1)    // nlink
	le.PutUint32(b[80:], 4096) // blksize
	return b
}

func (s *stallFS) serve() {
	buf := make([]byte, 1<<20+4096)
	le := binary.LittleEndian
	for {
		n, err := unix.Read(s.dev, buf)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if n < 40 {
			continue
		}
		op := le.Uint32(buf[4:])
		unique := le.Uint64(buf[8:])
		node := le.Uint64(buf[16:])
		switch op {
		case 26: // INIT
			out := make([]byte, 64)
			le.PutUint32(out[0:], 7)
			le.PutUint32(out[4:], 31)
			le.PutUint32(out[8:], 65536)
			le.PutUint32(out[20:], 65536) // max_write
			s.reply(unique, 0, out)
		case 1: // LOOKUP -> node 2, a regular file
			out := make([]byte, 40)
			le.PutUint64(out[0:], 2)
			s.reply(unique, 0, append(out, attr(2, unix.S_IFREG|0o644)...))
		case 3: // GETATTR
			if s.hang.Load() {
				continue // never answered
			}
			mode := uint32(unix.S_IFDIR | 0o755)
			if node == 2 {
				mode = unix.S_IFREG | 0o644
			}
			s.reply(unique, 0, append(make([]byte, 16), attr(node, mode)...))
		case 14, 27: // OPEN, OPENDIR
			s.reply(unique, 0, make([]byte, 16))
		case 2, 42, 36: // FORGET, BATCH_FORGET, INTERRUPT: no reply
		case 18, 25, 29: // RELEASE, FLUSH, RELEASEDIR
			s.reply(unique, 0, nil)
		default:
			s.reply(unique, -int32(unix.ENOSYS), nil)
		}
	}
}

// fuseFile mounts a stallFS (root and /dev/fuse only) and returns its file, open, with
// GETATTR no longer answered, and a function that aborts the connection.
func fuseFile(t *testing.T) (*os.File, func()) {
	dir := t.TempDir()
	dev, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	t.Cleanup(func() { unix.Close(dev) })
	opts := "fd=" + strconv.Itoa(dev) + ",rootmode=40000,user_id=0,group_id=0"
	if err := unix.Mount("cuvmm-stall", dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Skipf("cannot mount FUSE here: %v", err)
	}
	s := &stallFS{dev: dev}
	go s.serve()
	f, err := os.Open(dir + "/file")
	require.NoError(t, err)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(dir, &st))
	s.hang.Store(true)
	abort := func() {
		_ = os.WriteFile("/sys/fs/fuse/connections/"+strconv.Itoa(int(unix.Minor(uint64(st.Dev))))+"/abort", []byte("1"), 0)
	}
	t.Cleanup(func() { abort(); f.Close(); unix.Unmount(dir, unix.MNT_DETACH) })
	return f, abort
}

// A FUSE file whose server no longer answers, taken from a peer as memory, as a dma-buf or
// as a ticket's manifest (whose seals Fetch asks first), is refused or taken at once:
// nothing waits on its file system.
func TestFUSEDescriptorsDoNotHang(t *testing.T) {
	f, _ := fuseFile(t)
	fd := int(f.Fd())
	within := func(what string, call func() error) error {
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
	require.NoError(t, within("Memory", func() error { return Memory(fd, 0) }), "a regular file may be memory: the import decides")
	err := within("DmaBuf", func() error { return DmaBuf(fd) })
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorContains(t, err, "not a dma-buf")
	err = within("Seals", func() error { _, err := Seals(fd); return err })
	require.Error(t, err, "no memory file: no seals")
	err = within("Stat", func() error {
		st, err := Stat(fd)
		if err == nil && NotMemory(uint32(st.Mode)) != "" {
			err = errors.New("a regular file read as " + NotMemory(uint32(st.Mode)))
		}
		return err
	})
	require.NoError(t, err)
}
