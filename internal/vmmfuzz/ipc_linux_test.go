package vmmfuzz_test

import (
	"net"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/ipc/pidfd"
	"golang.org/x/sys/unix"
)

// openFDs lists the process's open descriptors.
func openFDs(t testing.TB) fdSet {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	set := fdSet{}
	for _, e := range es {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			set[fd] = [2]uint64{uint64(st.Dev), uint64(st.Ino)}
		}
	}
	return set
}

// warmUp opens what the process keeps open once it has used a socket (the network
// poller's descriptors), so that a run's count does not include them.
var warmUp = sync.OnceFunc(func() {
	if a, z, err := socketpair(unix.SOCK_STREAM); err == nil {
		a.Close()
		z.Close()
	}
})

// socketpair is a connected pair of Unix sockets of type typ.
func socketpair(typ int) (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	conn := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		return c.(*net.UnixConn), nil
	}
	a, err := conn(fds[0])
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	z, err := conn(fds[1])
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, z, nil
}

// ipcTransfer sends an export, or a message whose header lies about it, to this process
// over a socket and imports what arrives, as a peer process would.
func (w *world) ipcTransfer(a *args) {
	typ := of(a, unix.SOCK_SEQPACKET, unix.SOCK_STREAM, unix.SOCK_DGRAM)
	snd, rcv, err := socketpair(typ)
	if err != nil {
		w.errorf("socketpair: %v", err)
		return
	}
	defer rcv.Close()
	e, ok := pick(w, a, &w.exported)
	switch {
	case !ok || a.n(4) == 0:
		// A header that claims sizes of its own, with descriptors of anything.
		var fds []int
		var sizes []uint64
		for range 1 + a.n(3) {
			fd := otherFD()
			if x, ok := pick(w, a, &w.fds); ok && a.n(4) != 0 {
				fd = x
			}
			fds, sizes = append(fds, fd), append(sizes, a.size(w.gran))
		}
		h := ipc.Header{HandleType: of[cu.MemHandleType](a, 1, 1, 8), Granularity: of[uint64](a, w.gran, w.gran, 4096, 1<<40), Sizes: sizes}
		err = ipc.SendFDs(snd, h, fds)
		w.check("ipc.SendFDs", err, "send")
	default:
		err = ipc.Send(snd, e)
		w.check("ipc.Send", err, "send")
	}
	snd.Close() // Receive sees the end of the stream, whatever was sent
	if err != nil {
		return
	}
	m, access := w.mgr(a), a.devList(w.devs)
	if a.bit() {
		x, err := ipc.ReceiveAndImport(rcv, m, access)
		w.check("ipc.ReceiveAndImport", err, "receive", "import")
		if err == nil {
			put(w, &w.imported, x)
		}
		return
	}
	r, err := ipc.Receive(rcv)
	w.check("ipc.Receive", err, "receive")
	if err != nil {
		return
	}
	x, err := ipc.Import(m, r, access)
	w.check("ipc.Import", err, "import")
	if err == nil {
		put(w, &w.imported, x)
	}
	_ = r.FDs()
	w.check("Received.Close", r.Close(), "close")
}

// ipcTicket publishes an export as a ticket, in text form (sometimes altered on the way),
// and fetches and imports its descriptors with pidfd_getfd, as a process without a socket
// to the exporter would; the exporter is this process.
func (w *world) ipcTicket(a *args) {
	e, ok := pick(w, a, &w.exported)
	if !ok {
		return
	}
	tk, err := pidfd.Publish(e)
	w.check("pidfd.Publish", err, "publish")
	if err != nil {
		return
	}
	text, err := tk.MarshalText()
	if err != nil {
		w.errorf("Ticket.MarshalText: %v", err)
		return
	}
	if a.n(4) == 0 {
		text[a.n(len(text))] ^= 1 << a.n(7)
	}
	if tk, err = pidfd.ParseTicket(string(text)); err != nil {
		w.check("pidfd.ParseTicket", err, "ticket")
		return
	}
	m, access := w.mgr(a), a.devList(w.devs)
	if a.bit() {
		x, err := pidfd.FetchAndImport(tk, m, access, pidfd.AllowSelf())
		w.check("pidfd.FetchAndImport", err, "fetch", "import")
		if err == nil {
			put(w, &w.imported, x)
		}
		return
	}
	r, err := pidfd.Fetch(tk, pidfd.AllowSelf())
	w.check("pidfd.Fetch", err, "fetch")
	if err != nil {
		return
	}
	x, err := ipc.Import(m, r, access)
	w.check("ipc.Import", err, "import")
	if err == nil {
		put(w, &w.imported, x)
	}
	w.check("Received.Close", r.Close(), "close")
}
