package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/vmm"
	"golang.org/x/sys/unix"
)

// envChild marks a re-executed vmmprobe as the child of the cross-process check; its value
// names the backend the child opens ("cuda" or "sim:PRESET").
const envChild = "CUVMM_VMMPROBE_CHILD"

// childTimeout bounds each exchange with the child (the first one includes loading the
// driver and creating a context).
const childTimeout = 2 * time.Minute

// errIPCUnsupported is returned where descriptors cannot be passed to a child (not Linux).
var errIPCUnsupported = errors.New("cross-process file descriptor passing is not supported here")

// ipcSupported says whether the cross-process check can run here.
const ipcSupported = true

// The parent and the child talk over a SOCK_SEQPACKET socket pair, the child's end as its
// fd 3. Each request is a 24-byte message {size, seed, device} carrying one descriptor
// (SCM_RIGHTS); each reply a JSON childError, Step "done" on success. The child exits when
// the parent closes its end.
const requestSize = 24

// ipcChild is this executable running again as the child of the cross-process check. One
// child serves every device of a check run, so the driver is loaded once.
type ipcChild struct {
	cmd    *exec.Cmd
	sock   int
	stderr *limitedBuffer
	done   chan error
}

// startIPCChild starts the child; spec names the backend it opens.
func startIPCChild(spec string) (*ipcChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	tv := unix.NsecToTimeval(childTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(pair[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(pair[0])
		unix.Close(pair[1])
		return nil, fmt.Errorf("socket timeout: %w", err)
	}
	childEnd := os.NewFile(uintptr(pair[1]), "vmmprobe-child")
	c := &ipcChild{cmd: reexec.Command(exe), sock: pair[0], stderr: &limitedBuffer{max: 4096}, done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), envChild+"="+spec)
	c.cmd.ExtraFiles = []*os.File{childEnd} // fd 3 in the child
	c.cmd.Stdout, c.cmd.Stderr = c.stderr, c.stderr
	err = c.cmd.Start()
	childEnd.Close()
	if err != nil {
		unix.Close(c.sock)
		return nil, fmt.Errorf("start child: %w", err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	return c, nil
}

// run has the child import fd (size bytes of device dev holding pattern(seed)), map it,
// check the bytes and write pattern(seed+1) over the first 4 KiB. A *childError is a
// failure the child reported; any other error means the child is gone.
func (c *ipcChild) run(fd, dev int, size uint64, seed byte) error {
	req := make([]byte, requestSize)
	binary.LittleEndian.PutUint64(req, size)
	binary.LittleEndian.PutUint64(req[8:], uint64(seed))
	binary.LittleEndian.PutUint64(req[16:], uint64(dev))
	if err := sendmsg(c.sock, req, unix.UnixRights(fd), nil, 0); err != nil {
		return c.gone(fmt.Errorf("sendmsg: %w", err))
	}
	buf := make([]byte, 64<<10)
	n, _, _, _, err := recvmsg(c.sock, buf, nil, 0)
	if err != nil {
		return c.gone(fmt.Errorf("recvmsg: %w", err))
	}
	if n == 0 {
		return c.gone(errors.New("the child exited"))
	}
	var r childError
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return c.gone(fmt.Errorf("reply %q: %w", buf[:n], err))
	}
	if r.Step != "done" {
		return &r
	}
	return nil
}

// gone kills the child and returns err with what it wrote on stderr.
func (c *ipcChild) gone(err error) error {
	c.close()
	if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	return &childError{Step: "exchange", Msg: err.Error()}
}

// close ends the child: closing the socket makes it exit.
func (c *ipcChild) close() {
	if c.sock < 0 {
		return
	}
	unix.Close(c.sock)
	c.sock = -1
	select {
	case <-c.done:
	case <-time.After(childTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// runChildIfRequested acts as the child of the cross-process check when this process was
// started as one, and returns its exit status and true; otherwise it returns false at once.
func runChildIfRequested(open func(spec string) (vmm.Backend, error)) (int, bool) {
	spec, ok := os.LookupEnv(envChild)
	if !ok {
		return 0, false
	}
	if err := serveChild(spec, open); err != nil {
		fmt.Fprintln(os.Stderr, "vmmprobe child:", err)
		return 1, true
	}
	return 0, true
}

// serveChild answers the parent's requests on fd 3 until it closes its end.
func serveChild(spec string, open func(string) (vmm.Backend, error)) error {
	const sock = 3
	reply := func(r childError) error {
		out, _ := json.Marshal(r)
		return sendmsg(sock, out, nil, nil, 0)
	}
	b, err := open(spec)
	if err != nil {
		// Answer the first request with the reason, so the parent can report it.
		buf := make([]byte, requestSize)
		oob := make([]byte, unix.CmsgSpace(4))
		if _, oobn, _, _, rerr := recvmsg(sock, buf, oob, 0); rerr == nil {
			closeRights(oob[:oobn])
		}
		_ = reply(failure("open backend", err))
		return err
	}
	m := vmm.New(b)
	for {
		buf := make([]byte, requestSize)
		oob := make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := recvmsg(sock, buf, oob, 0)
		if err != nil {
			return fmt.Errorf("recvmsg: %w", err)
		}
		if n == 0 {
			return nil // the parent is done
		}
		fds := rights(oob[:oobn])
		var r childError
		switch {
		case n != requestSize:
			r = failure("recvmsg", fmt.Errorf("request of %d bytes", n))
		case len(fds) != 1:
			r = failure("recvmsg", fmt.Errorf("%d descriptors", len(fds)))
		default:
			r = importAndCheck(m, fds[0], binary.LittleEndian.Uint64(buf), byte(binary.LittleEndian.Uint64(buf[8:])),
				int(binary.LittleEndian.Uint64(buf[16:])))
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err := reply(r); err != nil {
			return fmt.Errorf("sendmsg: %w", err)
		}
	}
}

// rights returns the descriptors a control message carries.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if f, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

// closeRights closes the descriptors a control message carries.
func closeRights(oob []byte) {
	for _, fd := range rights(oob) {
		unix.Close(fd)
	}
}

func failure(step string, err error) childError {
	r := childError{Step: step, Msg: err.Error()}
	if res, ok := cu.ResultOf(err); ok {
		r.Result = res.Name()
	}
	return r
}

// importAndCheck imports fd, maps it for device dev, checks the parent's bytes and writes
// its own over the first 4 KiB.
func importAndCheck(m *vmm.Manager, fd int, size uint64, seed byte, dev int) childError {
	mem, err := m.ImportFD(fd, size)
	if err != nil {
		return failure("import", err)
	}
	defer mem.Close()
	va, err := m.Reserve(size)
	if err != nil {
		return failure("reserve", err)
	}
	defer va.Close()
	mp, err := va.Map(0, mem, 0, size)
	if err != nil {
		return failure("map", err)
	}
	if err := mp.SetAccess(vmm.ReadWrite(dev)...); err != nil {
		return failure("set-access", err)
	}
	got := make([]byte, size)
	if err := m.CopyOut(dev, got, mp.Addr()); err != nil {
		return failure("copy out", err)
	}
	if err := compare(got, pattern(seed, int(size))); err != nil {
		return failure("data check", err)
	}
	if err := m.CopyIn(dev, mp.Addr(), pattern(seed+1, 4096)); err != nil {
		return failure("copy in", err)
	}
	if err := va.Close(); err != nil {
		return failure("teardown", err)
	}
	if err := mem.Close(); err != nil {
		return failure("teardown", err)
	}
	return childError{Step: "done"}
}

// limitedBuffer keeps the first max bytes written to it.
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

func (l *limitedBuffer) String() string { return string(l.b) }

// recvmsg is unix.Recvmsg, retried when a signal (the Go runtime's preemption among them)
// interrupts it.
func recvmsg(fd int, p, oob []byte, flags int) (n, oobn, recvflags int, from unix.Sockaddr, err error) {
	for {
		n, oobn, recvflags, from, err = unix.Recvmsg(fd, p, oob, flags)
		if err != unix.EINTR {
			return n, oobn, recvflags, from, err
		}
	}
}

// sendmsg is unix.Sendmsg, retried when a signal interrupts it.
func sendmsg(fd int, p, oob []byte, to unix.Sockaddr, flags int) error {
	for {
		if err := unix.Sendmsg(fd, p, oob, to, flags); err != unix.EINTR {
			return err
		}
	}
}
