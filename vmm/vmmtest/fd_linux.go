package vmmtest

// What needs Linux descriptors: the cross-process case and its child, and the dma-buf
// group's descriptors.

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/vmm"
	"golang.org/x/sys/unix"
)

// EnvChild marks the re-executed test binary as the child of the cross-process case.
const EnvChild = "CUVMM_VMMTEST_CHILD"

// RunChildIfRequested makes the test binary act as the child of the cross-process case
// when it was started as one, and exits; otherwise it returns at once. Call it first in
// TestMain. open returns the backend the child imports into.
func RunChildIfRequested(open func() (vmm.Backend, error)) {
	if os.Getenv(EnvChild) == "" {
		return
	}
	if err := child(open); err != nil {
		fmt.Fprintln(os.Stderr, "vmmtest child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child receives {size, seed} and either one descriptor on fd 3 or, after the header, a
// fabric handle; it imports the memory, checks the parent's bytes and writes its own for
// the parent to check.
func child(open func() (vmm.Backend, error)) error {
	b, err := open()
	if err != nil {
		return err
	}
	buf := make([]byte, 16+len(cu.MemFabricHandle{}))
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	for {
		n, oobn, _, _, err = unix.Recvmsg(3, buf, oob, 0)
		if err != unix.EINTR { // the Go runtime's signals interrupt blocking calls
			break
		}
	}
	if err != nil {
		return fmt.Errorf("recvmsg: %w", err)
	}
	var h cu.MemHandle
	switch {
	case n == 16 && oobn > 0:
		fd, err := oneRight(oob[:oobn])
		if err != nil {
			return err
		}
		h, err = b.ImportFD(fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
	case n == len(buf) && oobn == 0:
		if h, err = b.ImportFabric(cu.MemFabricHandle(buf[16:])); err != nil {
			return err
		}
	default:
		return fmt.Errorf("message of %d bytes with %d of control", n, oobn)
	}
	defer b.Release(h)
	size := binary.LittleEndian.Uint64(buf[:8])
	seed := byte(binary.LittleEndian.Uint64(buf[8:]))
	va, err := b.Reserve(size, 0, 0, 0)
	if err != nil {
		return err
	}
	defer b.Free(va, size)
	if err := b.Map(va, size, 0, h, 0); err != nil {
		return err
	}
	defer b.Unmap(va, size)
	if err := b.SetAccess(va, size, rw(0)); err != nil {
		return err
	}
	got := make([]byte, size)
	if err := b.CopyDtoH(0, got, va); err != nil {
		return err
	}
	want := Pattern(seed, int(size))
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("byte %d of %d: got %#x, want %#x", i, size, got[i], want[i])
		}
	}
	return b.CopyHtoD(0, va, Pattern(seed+1, 4096))
}

// oneRight is the one descriptor a control message carries.
func oneRight(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("control message: %v (%d)", err, len(msgs))
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("rights: %v (%d)", err, len(fds))
	}
	return fds[0], nil
}

// openDescriptors lists the process's open descriptors, each as "fd->what it is open on".
func openDescriptors(t *testing.T) []string {
	ents, err := os.ReadDir("/proc/self/fd")
	noError(t, err)
	out := make([]string, len(ents))
	for i, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out[i] = e.Name() + "->" + l
	}
	return out
}

func closeDescriptor(fd int) { unix.Close(fd) }

// descriptorSize is what lseek to the end of fd says: a dma-buf's size.
func descriptorSize(fd int) (int64, error) { return unix.Seek(fd, 0, unix.SEEK_END) }

// dmaBufDescriptors lists the open descriptors that are dma-bufs: the kernel's ("/dmabuf:",
// "anon_inode:dmabuf" on older kernels) and sim's (a memfd named "cuvmm-sim.dmabuf:...").
// Only they are counted: a driver may open descriptors of its own on first use.
func dmaBufDescriptors(t *testing.T) []string {
	var out []string
	for _, d := range openDescriptors(t) {
		if strings.Contains(d, "dmabuf") {
			out = append(out, d)
		}
	}
	return out
}

func testIPC(t *testing.T, e *env) {
	skipIf(t, !e.caps.CrossProcess, "not declared: Capabilities.CrossProcess")
	skipIf(t, !e.posixFD(), "device 0 has no POSIX file descriptor handles")
	// The runtime (network poller) and a backend (its own long-lived descriptors) may open
	// descriptors on first use: a leak is what a second identical exchange leaves behind.
	t.Run("first", func(t *testing.T) { exchange(t, e) })
	before := len(openDescriptors(t))
	t.Run("second", func(t *testing.T) { exchange(t, e) })
	if after := openDescriptors(t); len(after) != before {
		t.Fatalf("descriptors leaked: %d before, %d after: %v", before, len(after), after)
	}
}

// exchange sends an exported allocation to a child process, which checks the parent's
// bytes and writes its own.
func exchange(t *testing.T, e *env) {
	j := newJanitor(t, e.b)
	p := e.prop(0)
	p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	size := 2 * e.g
	h, va := j.mustBuffer(size, p)
	const seed = 42
	j.mustWrite(va, seed, int(size))
	noError(t, sendToChild(t, e, va, size, seed, nil, unix.UnixRights(j.mustExportFD(h))))
}

type limitedBuffer struct {
	max int
	b   []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// fileOf names the file descriptor fd is open on: its device and inode.
func fileOf(fd int) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// sendToChild sends memory of size bytes mapped at va, holding Pattern(seed, size), to a
// child process: the header {size, seed}, then the fabric handle fh if any, with the control
// message oob. The child imports it, checks the bytes and writes Pattern(seed+1, 4096), which
// this checks in turn; it returns the child's error.
func sendToChild(t *testing.T, e *env, va cu.DevicePtr, size uint64, seed byte, fh, oob []byte) error {
	msg := make([]byte, 16, 16+len(fh))
	binary.LittleEndian.PutUint64(msg, size)
	binary.LittleEndian.PutUint64(msg[8:], uint64(seed))
	err := runChild(t, append(msg, fh...), oob)
	if err == nil {
		requireBytes(t, e.b, 0, va, Pattern(seed+1, 4096))
	}
	return err
}

// runChild re-executes the test binary as the child, sends it msg with the control
// message oob, and waits for it; its output is in the error.
func runChild(t *testing.T, msg, oob []byte) error {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	noError(t, err)
	parent := os.NewFile(uintptr(pair[0]), "parent")
	childEnd := os.NewFile(uintptr(pair[1]), "child")
	defer parent.Close()

	cmd := reexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), EnvChild+"=1")
	cmd.ExtraFiles = []*os.File{childEnd} // fd 3 in the child
	out := &limitedBuffer{max: 1 << 16}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	childEnd.Close()
	noError(t, err)
	if err := unix.Sendmsg(pair[0], msg, oob, nil, 0); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("child: %w: %s", err, out.b)
	}
	return nil
}
