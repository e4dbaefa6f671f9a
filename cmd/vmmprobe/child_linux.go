package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"golang.org/x/sys/unix"
)

// The parent and the child talk over a SOCK_SEQPACKET socket pair, the child's end as its
// descriptor 3, so that each message arrives whole. Each exchange is a JSON childRequest,
// then, for a POSIX descriptor, the message package vmm/ipc sends (ipc.Send: its header and
// the descriptor), so the check runs the code users run; the child answers with a JSON
// childError, Step "done" on success. The child exits when the parent closes its end.

// envChild marks a re-executed vmmprobe as the child of the cross-process checks; its value
// names the backend the child opens (internal/backend's spec: "cuda" or "sim:PRESET").
const envChild = "CUVMM_VMMPROBE_CHILD"

// childTimeout bounds each exchange with the child (the first one includes loading the
// driver and creating a context).
const childTimeout = 2 * time.Minute

// maxCheckSize bounds what a child agrees to read: the checks use one granule.
const maxCheckSize = 64 << 20

// failure is the answer for a step that failed with err, naming the driver's result.
func failure(step string, err error) childError {
	r := childError{Step: step, Msg: err.Error()}
	if res, ok := cu.ResultOf(err); ok {
		r.Result = res.Name()
	}
	return r
}

// limitedBuffer keeps the first max bytes written to it: the child's stderr, for messages.
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

// maxChildMessage bounds a request or a reply read from the other process.
const maxChildMessage = 64 << 10

// ipcChild is this executable running again as the child of the cross-process checks. One
// child serves every device of a check run, so the driver is loaded once.
type ipcChild struct {
	cmd    *exec.Cmd
	conn   *net.UnixConn
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
	conn, err := unixConn(pair[0], "vmmprobe-parent")
	if err != nil {
		unix.Close(pair[1])
		return nil, err
	}
	childEnd := os.NewFile(uintptr(pair[1]), "vmmprobe-child")
	c := &ipcChild{cmd: reexec.Command(exe), conn: conn, stderr: &limitedBuffer{max: 4096}, done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), envChild+"="+spec)
	c.cmd.ExtraFiles = []*os.File{childEnd} // descriptor 3 in the child
	c.cmd.Stdout, c.cmd.Stderr = c.stderr, c.stderr
	err = c.cmd.Start()
	childEnd.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start child: %w", err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	return c, nil
}

// unixConn makes a *net.UnixConn of a socket descriptor, which it takes over.
func unixConn(fd int, name string) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close() // net.FileConn duplicates it
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("socket: %T is not a Unix socket", c)
	}
	return uc, nil
}

// run sends req (and, for a POSIX descriptor, exp through ipc.Send) and waits for the
// child's answer. A *childError is a failure the child reported; a childError with Step
// "exchange" means the child is gone.
func (c *ipcChild) run(req childRequest, exp *ipc.Exported) error {
	// Every exchange is bounded: a child stuck in the driver must not hang vmmprobe.
	if err := c.conn.SetDeadline(time.Now().Add(childTimeout)); err != nil {
		return c.gone(err)
	}
	msg, err := json.Marshal(req)
	if err != nil {
		return c.gone(err)
	}
	if _, err := c.conn.Write(msg); err != nil {
		return c.gone(fmt.Errorf("send request: %w", err))
	}
	if exp != nil {
		if err := ipc.Send(c.conn, exp); err != nil {
			return c.gone(err)
		}
	}
	buf := make([]byte, maxChildMessage)
	n, err := c.conn.Read(buf)
	if err != nil {
		return c.gone(fmt.Errorf("read reply: %w", err))
	}
	if n == 0 {
		return c.gone(errors.New("the child exited"))
	}
	var r childError
	if err := json.Unmarshal(buf[:n], &r); err != nil || r.Step == "" {
		return c.gone(fmt.Errorf("reply %q is not a child's answer", clip(buf[:n], 200)))
	}
	if r.Step != "done" {
		return &r
	}
	return nil
}

// gone ends the child and returns err with what it wrote on stderr.
func (c *ipcChild) gone(err error) error {
	c.close()
	if msg := strings.TrimSpace(c.stderr.String()); msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	return &childError{Step: "exchange", Msg: err.Error()}
}

// close ends the child: closing the socket makes it exit; one that does not is killed.
func (c *ipcChild) close() {
	if c.conn == nil {
		return
	}
	c.conn.Close()
	c.conn = nil
	select {
	case <-c.done:
	case <-time.After(childTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// runChildIfRequested acts as the child of the cross-process checks when this process was
// started as one, and returns its exit status and true; otherwise it returns false at once.
func runChildIfRequested(o backend.Opener) (int, bool) {
	spec, ok := os.LookupEnv(envChild)
	if !ok {
		return 0, false
	}
	conn, err := unixConn(3, "vmmprobe-child")
	if err == nil {
		err = serveChild(conn, spec, o)
		conn.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vmmprobe child:", err)
		return 1, true
	}
	return 0, true
}

// serveChild answers the parent's requests on conn until it closes its end. Requests
// that make no sense are answered with why, and serving goes on.
func serveChild(conn *net.UnixConn, spec string, o backend.Opener) error {
	var m *vmm.Manager
	op, openErr := o.OpenSpec(spec)
	if openErr == nil {
		m = vmm.New(op.Backend)
	}
	buf := make([]byte, maxChildMessage)
	for {
		n, err := conn.Read(buf)
		if n == 0 || err != nil {
			return nil // the parent is done (or gone)
		}
		var req childRequest
		var r childError
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			r = childError{Step: "request", Msg: fmt.Sprintf("request %q: %v", clip(buf[:n], 200), err)}
		} else if openErr != nil {
			drain(conn, req)
			r = failure("open backend", openErr)
		} else {
			r = importAndCheck(conn, m, req)
		}
		out, _ := json.Marshal(r)
		if _, err := conn.Write(out); err != nil {
			return fmt.Errorf("send reply: %w", err)
		}
		if openErr != nil {
			return openErr
		}
	}
}

// drain takes the descriptor message of a request that will not be served, so that its
// descriptor is closed and the next request is read from the right place.
func drain(conn *net.UnixConn, req childRequest) {
	if req.Kind != kindPosixFD {
		return
	}
	if rcv, err := ipc.Receive(conn); err == nil {
		rcv.Close()
	}
}

// importAndCheck imports what the request names through package vmm/ipc (the descriptor
// that follows, or the fabric handle it carries), maps it for its device, checks the
// parent's bytes and writes its own over the first 4 KiB.
func importAndCheck(conn *net.UnixConn, m *vmm.Manager, req childRequest) childError {
	var imp *ipc.Imported
	var err error
	switch req.Kind {
	case kindPosixFD:
		imp, err = ipc.ReceiveAndImport(conn, m, []int{req.Device})
	case kindFabric:
		var h ipc.FabricHandle
		if err = h.UnmarshalText([]byte(req.Fabric)); err == nil {
			imp, err = ipc.ImportFabric(m, []ipc.FabricHandle{h}, []int{req.Device})
		}
	default:
		return childError{Step: "request", Msg: fmt.Sprintf("unknown kind %q", req.Kind)}
	}
	if err != nil {
		return failure("import", err)
	}
	r := verifyImported(imp, req)
	if err := imp.Close(); err != nil && r.Step == "done" {
		r = failure("teardown", err)
	}
	return r
}

// verifyImported reads the whole of the imported memory and checks it holds the parent's
// pattern, then writes the child's over the first 4 KiB.
func verifyImported(imp *ipc.Imported, req childRequest) childError {
	if imp.Size() != req.Size || req.Size > maxCheckSize {
		return childError{Step: "import", Msg: fmt.Sprintf("imported %d bytes, the request says %d", imp.Size(), req.Size)}
	}
	got := make([]byte, req.Size)
	if _, err := imp.ReadAt(got, 0); err != nil {
		return failure("copy out", err)
	}
	if err := compare(got, pattern.Bytes(req.Seed, int(req.Size))); err != nil {
		return failure("data check", err)
	}
	if _, err := imp.WriteAt(pattern.Bytes(req.Seed+1, childWrite), 0); err != nil {
		return failure("copy in", err)
	}
	return childError{Step: "done"}
}

// clip shortens what another process sent for an error message.
func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
