package fusetest

import (
	"encoding/binary"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FS is a mounted FUSE file system, served by this process, in which every name is one
// regular file.
type FS struct {
	// Dir is where it is mounted, a temporary directory of the test.
	Dir  string
	dev  int
	done chan struct{} // closed once the server has stopped

	mu      sync.Mutex
	stalled bool
	flush   bool     // FLUSH is held too
	held    []uint64 // the requests held, by unique id
	stopped bool     // dev is closed
	files   []*os.File
}

// The opcodes the server answers (include/uapi/linux/fuse.h).
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opOpen        = 14
	opRelease     = 18
	opFlush       = 25
	opInit        = 26
	opOpendir     = 27
	opReleasedir  = 29
	opInterrupt   = 36
	opBatchForget = 42
)

// Mount mounts an FS, or skips t where /dev/fuse or mount(2) is not available. Its
// cleanup ends any stall (Release), closes the files Open opened, detaches the mount and
// waits, 5 s at most, for the server to stop, which it does once no file of the file system
// is open anywhere in the process.
func Mount(t testing.TB) *FS {
	t.Helper()
	dir := t.TempDir()
	dev, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	opts := "fd=" + strconv.Itoa(dev) + ",rootmode=40000,user_id=0,group_id=0"
	if err := unix.Mount("cuvmm-stall", dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(dev)
		t.Skipf("cannot mount FUSE here: %v", err)
	}
	fs := &FS{Dir: dir, dev: dev, done: make(chan struct{})}
	go fs.serve()
	t.Cleanup(func() {
		fs.Release()
		for _, f := range fs.files {
			f.Close()
		}
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		select {
		case <-fs.done:
		case <-time.After(5 * time.Second):
			t.Errorf("FUSE file system %s: a file of it is still open 5 s after the test", dir)
		}
	})
	return fs
}

// Open opens the file called name (every name is the one file), blocking; the cleanup
// closes it. Not os.Open: it adds the file to Go's poller, whose epoll_ctl asks the server
// (FUSE_POLL) from inside the runtime, holding a P that nothing can take back while the
// server, a goroutine of this process, waits for one.
func (fs *FS) Open(t testing.TB, name string) *os.File {
	t.Helper()
	fd, err := unix.Open(fs.Dir+"/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open a file of the FUSE file system: %v", err)
	}
	f := os.NewFile(uintptr(fd), name)
	fs.mu.Lock()
	fs.files = append(fs.files, f)
	fs.mu.Unlock()
	return f
}

// Detach unmounts the file system lazily (MNT_DETACH): the files open stay so, and
// /proc/self/fd shows each as "/NAME", a path no longer reachable.
func (fs *FS) Detach(t testing.TB) {
	t.Helper()
	if err := unix.Unmount(fs.Dir, unix.MNT_DETACH); err != nil {
		t.Fatalf("detach the FUSE file system: %v", err)
	}
}

// Stall makes the server hold every request but RELEASE, and FLUSH unless flush, until
// Release: an fstat or fstatfs of a file of it then waits, and with flush so does every
// close(2) of one.
func (fs *FS) Stall(flush bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.stalled, fs.flush = true, flush
}

// Release ends the stall: each request held is answered with EIO, and those after it as
// before.
func (fs *FS) Release() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, unique := range fs.held {
		if !fs.stopped {
			fs.reply(unique, -int32(unix.EIO), nil)
		}
	}
	fs.stalled, fs.held = false, nil
}

// hold says whether the request is held, and holds it.
func (fs *FS) hold(op uint32, unique uint64) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.stalled || op == opRelease || op == opReleasedir || op == opFlush && !fs.flush {
		return false
	}
	fs.held = append(fs.held, unique)
	return true
}

func (fs *FS) reply(unique uint64, errno int32, body []byte) {
	b := make([]byte, 16+len(body))
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b)))
	binary.LittleEndian.PutUint32(b[4:], uint32(errno))
	binary.LittleEndian.PutUint64(b[8:], unique)
	copy(b[16:], body)
	_, _ = unix.Write(fs.dev, b)
}

// attr is a fuse_attr of inode ino with mode.
func attr(ino uint64, mode uint32) []byte {
	b := make([]byte, 88)
	le := binary.LittleEndian
	le.PutUint64(b[0:], ino)
	le.PutUint32(b[60:], mode) // after 6 u64 and 3 u32
	le.PutUint32(b[64:], 1)    // nlink
	le.PutUint32(b[80:], 4096) // blksize
	return b
}

// serve answers the kernel's requests until the connection ends (the file system is
// unmounted and no file of it is open).
func (fs *FS) serve() {
	defer close(fs.done)
	defer func() {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		fs.stopped = true
		unix.Close(fs.dev)
	}()
	buf := make([]byte, 1<<20+4096)
	le := binary.LittleEndian
	for {
		n, err := unix.Read(fs.dev, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if n < 40 {
			continue
		}
		op, unique, node := le.Uint32(buf[4:]), le.Uint64(buf[8:]), le.Uint64(buf[16:])
		if op == opForget || op == opBatchForget || op == opInterrupt || fs.hold(op, unique) {
			continue // no reply, or none yet
		}
		switch op {
		case opInit:
			out := make([]byte, 64)
			le.PutUint32(out[0:], 7)
			le.PutUint32(out[4:], 31)
			le.PutUint32(out[8:], 65536)
			le.PutUint32(out[20:], 65536) // max_write
			fs.reply(unique, 0, out)
		case opLookup: // every name is node 2, a regular file; nothing is cached
			out := make([]byte, 40)
			le.PutUint64(out[0:], 2)
			fs.reply(unique, 0, append(out, attr(2, unix.S_IFREG|0o644)...))
		case opGetattr:
			mode := uint32(unix.S_IFDIR | 0o755)
			if node == 2 {
				mode = unix.S_IFREG | 0o644
			}
			fs.reply(unique, 0, append(make([]byte, 16), attr(node, mode)...))
		case opOpen, opOpendir:
			fs.reply(unique, 0, make([]byte, 16))
		case opRelease, opFlush, opReleasedir:
			fs.reply(unique, 0, nil)
		default:
			fs.reply(unique, -int32(unix.ENOSYS), nil)
		}
	}
}
