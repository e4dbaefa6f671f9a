package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"golang.org/x/sys/unix"
)

// openFDs counts this process's open descriptors. The first call starts Go's network
// poller (two descriptors it keeps for the life of the process) so that counts taken
// before and after the first socket compare.
func openFDs() int {
	if pr, pw, err := os.Pipe(); err == nil {
		pr.Close()
		pw.Close()
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

func parent(r *run.Report, be vmm.Backend, f run.Flags, d devices) {
	m := vmm.New(be)
	props := vmm.Props{Location: vmm.OnDevice(d.parent), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
	b, err := buffer.New(m, 2*mib, buffer.Options{Device: d.parent, Props: &props, Policy: buffer.Exact})
	if !r.Check(err, "parent: buffer of exportable memory on device %d", d.parent) {
		return
	}
	defer func() { r.Check(b.Close(), "parent: close the buffer") }()
	for _, n := range []uint64{6, 8} {
		if err := b.Grow(n * mib); err != nil {
			r.Fail("parent: grow to %d MiB: %v", n, err)
			return
		}
	}
	want := pattern.Bytes(seed, int(b.Size()))
	if _, err := b.WriteAt(want, 0); !r.Check(err, "parent: grew to 8 MiB in %d chunks and wrote it", len(b.Chunks())) {
		return
	}
	// Count descriptors now that the driver is fully up (the real one opens a few dozen as
	// it creates a context), and again once everything the exchange opened is closed.
	before := openFDs()
	if !exchange(r, m, b, f, d) {
		return
	}
	if after := openFDs(); after == before {
		r.OK("parent: %d descriptors open before and after the exchange: none leaked", before)
	} else {
		r.Fail("parent: %d descriptors open before the exchange, %d after", before, after)
	}
	got := make([]byte, 4096)
	if _, err := b.ReadAt(got, int64(b.Size())-4096); err != nil || !bytes.Equal(got, pattern.Bytes(replySeed, 4096)) {
		r.Fail("parent: the child's reply is not in the parent's memory (%v)", err)
		return
	}
	r.OK("parent: the child's write (from device %d) shows through the parent's own mapping on device %d", d.child, d.parent)
}

// export exports b's chunks: each is retained by its address, exported as a descriptor and
// closed again (the buffer keeps the memory; the descriptor is the parent's own).
func export(m *vmm.Manager, b *buffer.Buffer) (*ipc.Exported, error) {
	var allocs []*vmm.Allocation
	defer func() {
		for _, a := range allocs {
			_ = a.Close()
		}
	}()
	for _, c := range b.Chunks() {
		a, err := m.Retain(b.Base() + cu.DevicePtr(c.Offset))
		if err != nil {
			return nil, err
		}
		allocs = append(allocs, a)
	}
	return ipc.Export(m, allocs...)
}

// exchange exports b's chunks, starts the child and sends them; it reports whether the
// child verified them.
func exchange(r *run.Report, m *vmm.Manager, b *buffer.Buffer, f run.Flags, d devices) bool {
	e, err := export(m, b)
	if !r.Check(err, "parent: exported %d chunks as descriptors", len(b.Chunks())) {
		return false
	}
	sizes := e.Header.Sizes
	defer func() { r.Check(e.Close(), "parent: close the exported descriptors (the parent's own)") }()

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if !r.Check(err, "parent: socket pair") {
		return false
	}
	mine := os.NewFile(uintptr(fds[0]), "parent socket")
	theirs := os.NewFile(uintptr(fds[1]), "child socket")
	defer mine.Close()
	c, err := net.FileConn(mine)
	if err != nil {
		theirs.Close()
		r.Fail("parent: socket: %v", err)
		return false
	}
	defer c.Close()
	conn := c.(*net.UnixConn)

	self, err := os.Executable()
	if err != nil {
		theirs.Close()
		r.Fail("parent: own executable: %v", err)
		return false
	}
	// The child uses the backend the parent ended up with, never a fallback of its own.
	args := []string{"--child", "--backend=" + m.Name(),
		fmt.Sprintf("--device=%d", d.parent), fmt.Sprintf("--child-device=%d", d.child)}
	if m.Name() == "sim" {
		args = append(args, "--preset="+f.Preset)
	}
	cmd := reexec.Command(self, args...)
	cmd.ExtraFiles = []*os.File{theirs} // descriptor 3 in the child
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Start()
	theirs.Close()
	if !r.Check(err, "parent: started the child") {
		return false
	}
	sendErr := ipc.Send(conn, e)
	r.Check(sendErr, "parent: sent a %d-byte header and %d descriptors", 32+8*len(sizes), len(sizes))
	waitErr := cmd.Wait()
	for _, line := range bytes.Split(bytes.TrimRight(out.Bytes(), "\n"), []byte("\n")) {
		if len(line) > 0 {
			fmt.Fprintf(r.W, "%s\n", line)
		}
	}
	if !r.Check(waitErr, "child exited cleanly") || sendErr != nil {
		return false
	}
	return true
}

func childMain(f run.Flags, d devices, stdout, stderr io.Writer) int {
	r := &run.Report{W: stdout}
	func() {
		be, _, err := run.Open("ipc child", f, stderr)
		if !r.Check(err, "child: opened backend %s", f.Kind) {
			return
		}
		// Checked again here: the child's view of the devices is its own (it could differ,
		// say with another CUDA_VISIBLE_DEVICES), and it is the child that maps the memory.
		if !r.Check(checkDevices(be, d), "child: on device %d, to map memory of device %d: %s", d.child, d.parent, d) {
			return
		}
		sock := os.NewFile(3, "socket")
		c, err := net.FileConn(sock) // a duplicate: close the original
		sock.Close()
		if !r.Check(err, "child: socket on descriptor 3") {
			return
		}
		defer c.Close()
		rcv, err := ipc.Receive(c.(*net.UnixConn))
		if !r.Check(err, "child: received a header and descriptors") {
			return
		}
		fds := rcv.FDs()
		imp, err := ipc.Import(vmm.New(be), rcv, []int{d.child})
		closeErr := rcv.Close()
		if !r.Check(err, "child: imported %d allocations, mapped them in one range and granted device %d access", len(fds), d.child) {
			return
		}
		// Checked before anything can reuse the numbers.
		open := 0
		for _, fd := range fds {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
				open++
			}
		}
		if closeErr != nil || open > 0 {
			r.Fail("child: %d received descriptors still open (%v)", open, closeErr)
		} else {
			r.OK("child: the %d received descriptors are closed (the import does not need them)", len(fds))
		}
		defer func() { r.Check(imp.Close(), "child: unmapped and released the imported memory") }()
		got := make([]byte, imp.Size())
		if _, err := imp.ReadAt(got, 0); err != nil || !bytes.Equal(got, pattern.Bytes(seed, len(got))) {
			r.Fail("child: the parent's %s do not match (%v)", units.Size(uint64(len(got))), err)
			return
		}
		r.OK("child: all %s the parent wrote on device %d read back at %v from device %d", units.Size(imp.Size()), d.parent, imp.Base(), d.child)
		_, err = imp.WriteAt(pattern.Bytes(replySeed, 4096), int64(imp.Size())-4096)
		r.Check(err, "child: wrote a reply in the last 4 KiB from device %d", d.child)
	}()
	return r.Exit()
}
