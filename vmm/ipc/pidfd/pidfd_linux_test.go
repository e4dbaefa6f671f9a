package pidfd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/ipc/pidfd"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// envPidfdChild makes the test binary the exporting child of pidfdCrossProcess; its value is
// the backend ("sim" or "cuda").
const envPidfdChild = "CUVMM_IPC_PIDFD_CHILD"

// envPidfdFetch makes the test binary a child that fetches the ticket in the variable, and
// says how that went on stdout (TestFetchAnotherUser).
const envPidfdFetch = "CUVMM_IPC_PIDFD_FETCH"

func runPidfdChildIfRequested() {
	if text, ok := os.LookupEnv(envPidfdFetch); ok {
		tk, err := pidfd.ParseTicket(text)
		if err == nil {
			var r *ipc.Received
			if r, err = pidfd.Fetch(tk); err == nil {
				err = r.Close()
			}
		}
		fmt.Printf("permission=%v unsupported=%v uid=%d\n%v\n", errors.Is(err, os.ErrPermission), errors.Is(err, ipc.ErrUnsupported), os.Geteuid(), err)
		os.Exit(0)
	}
	name := os.Getenv(envPidfdChild)
	if name == "" {
		return
	}
	if err := pidfdChild(name); err != nil {
		fmt.Fprintln(os.Stderr, "ipc pidfd child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// pidfdChild exports a buffer filled with vmmtest.Pattern(seed), names its parent as its
// importer, writes the ticket on stdout and waits for a line on stdin: "done" once the
// parent has imported and written vmmtest.Pattern(reply) at the end, which it checks; end
// of file where the parent gave up.
func pidfdChild(backend string) error {
	be, err := openBackend(backend)
	if err != nil {
		return err
	}
	m := vmm.New(be)
	props := vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
	b, err := buffer.New(m, 2*mib, buffer.Options{Props: &props, Policy: buffer.Exact})
	if err != nil {
		return err
	}
	defer b.Close()
	for _, size := range []uint64{6 * mib, 8 * mib} {
		if err := b.Grow(size); err != nil {
			return err
		}
	}
	if _, err := b.WriteAt(vmmtest.Pattern(seed, int(b.Size())), 0); err != nil {
		return err
	}
	var allocs []*vmm.Allocation
	for _, c := range b.Chunks() {
		a, err := m.Retain(b.Base() + cu.DevicePtr(c.Offset))
		if err != nil {
			return err
		}
		defer a.Close()
		allocs = append(allocs, a)
	}
	e, err := ipc.Export(m, allocs...)
	if err != nil {
		return err
	}
	defer e.Close()
	// Where Yama's ptrace_scope is 1 the parent, an ancestor, needs no leave; this says so
	// anyway, as an exporter whose importer is not its ancestor would.
	if err := pidfd.AllowImporter(os.Getppid()); err != nil {
		return err
	}
	t, err := pidfd.Publish(e)
	if err != nil {
		return err
	}
	text, err := t.MarshalText()
	if err != nil {
		return err
	}
	if _, err := fmt.Printf("%s\n", text); err != nil {
		return err
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err == io.EOF && line == "" {
		return nil // the parent skipped
	}
	if err != nil || line != "done\n" {
		return fmt.Errorf("parent said %q (%v)", line, err)
	}
	got := make([]byte, 4096)
	if _, err := b.ReadAt(got, int64(b.Size())-4096); err != nil {
		return err
	}
	if !bytes.Equal(got, vmmtest.Pattern(reply, 4096)) {
		return errors.New("the parent's write does not show in the exported memory")
	}
	return nil
}

// skipRefused skips the test where this system refuses pidfd_getfd (an old kernel, a
// seccomp filter, ptrace rules), saying why and the remedy.
func skipRefused(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ipc.ErrUnsupported) || errors.Is(err, os.ErrPermission) {
		t.Skipf("this system refuses pidfd_getfd: %v", err)
	}
}

// lockedBuffer is a bytes.Buffer that a child's output goroutine writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pidfdCrossProcess starts a re-executed test binary that exports a buffer and writes its
// ticket, imports it here by pidfd_getfd, checks its bytes, writes at its end and lets the
// child check that write. Descriptors are counted once the driver is fully up.
func pidfdCrossProcess(t *testing.T, backend string, be vmm.Backend) {
	m := vmm.New(be)
	// The driver's own descriptors are opened before the count (the real one opens a few
	// dozen when it creates a context, and maybe more at its first import): a round in this
	// process, which fetches its own descriptors, does it.
	func() {
		b := shareable(t, m)
		defer b.Close()
		e := exportBuffer(t, m, b)
		defer e.Close()
		tk, err := pidfd.Publish(e)
		require.NoError(t, err)
		r, err := pidfd.Fetch(tk, pidfd.AllowSelf())
		skipRefused(t, err)
		require.NoError(t, err)
		for i, fd := range r.FDs() {
			var st unix.Stat_t
			require.NoError(t, unix.Fstat(fd, &st))
			link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
			t.Logf("%s: descriptor %d of allocation %d is %q, mode %#o, file %d:%d, device %d:%d", backend, fd, i, link,
				st.Mode&unix.S_IFMT, st.Dev, st.Ino, unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		imp, err := ipc.Import(m, r, []int{0})
		require.NoError(t, errors.Join(err, r.Close()))
		got := make([]byte, imp.Size())
		_, err = imp.ReadAt(got, 0)
		require.NoError(t, err)
		require.Equal(t, vmmtest.Pattern(seed, int(8*mib)), got, "this process's own bytes, fetched back")
		require.NoError(t, imp.Close())
	}()
	before := openFDs(t)
	func() {
		cmd := reexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envPidfdChild+"="+backend)
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		waited := false
		wait := func() error {
			waited = true
			return cmd.Wait()
		}
		defer func() {
			if !waited {
				stdin.Close()
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}()
		type line struct {
			s   string
			err error
		}
		lines := make(chan line, 1)
		go func() {
			s, err := bufio.NewReader(stdout).ReadString('\n')
			lines <- line{s, err}
		}()
		var text string
		select {
		case l := <-lines:
			require.NoError(t, l.err, "the child's ticket (stderr: %s)", stderr.String())
			text = strings.TrimSuffix(l.s, "\n")
		case <-time.After(2 * time.Minute):
			t.Fatalf("no ticket from the child (stderr: %s)", stderr.String())
		}
		tk, err := pidfd.ParseTicket(text)
		require.NoError(t, err)
		require.Equal(t, cmd.Process.Pid, tk.PID, "under an emulator the child is the emulator's process")
		imp, err := pidfd.FetchAndImport(tk, m, []int{0})
		if err != nil {
			require.NoError(t, stdin.Close())
			require.NoError(t, wait(), "child: %s", stderr.String())
			skipRefused(t, err)
		}
		require.NoError(t, err)
		require.Equal(t, uint64(8*mib), imp.Size(), "the sizes the child's manifest lists")
		got := make([]byte, imp.Size())
		_, err = imp.ReadAt(got, 0)
		require.NoError(t, err)
		require.Equal(t, vmmtest.Pattern(seed, int(8*mib)), got, "the child's bytes")
		_, err = imp.WriteAt(vmmtest.Pattern(reply, 4096), int64(imp.Size())-4096)
		require.NoError(t, err)
		require.NoError(t, imp.Close())
		_, err = io.WriteString(stdin, "done\n")
		require.NoError(t, err)
		require.NoError(t, stdin.Close())
		require.NoError(t, wait(), "child: %s", stderr.String())
	}()
	requireOpenFDs(t, before, "descriptors leaked")
}

func TestFetchCrossProcess(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	pidfdCrossProcess(t, "sim", s)
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

func TestFetchInProcess(t *testing.T) {
	before := openFDs(t)
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	m := vmm.New(s)
	b := shareable(t, m)
	e := exportBuffer(t, m, b)
	tk, err := pidfd.Publish(e)
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), tk.PID)
	again, err := pidfd.Publish(e)
	require.NoError(t, err)
	require.NotEqual(t, tk.Manifest, again.Manifest, "each ticket a manifest of its own")
	require.NotEqual(t, secretOf(t, tk), secretOf(t, again), "and a secret of its own")
	require.NotContains(t, e.FDs(), tk.Manifest, "the manifest is a descriptor of its own")
	imp, err := pidfd.FetchAndImport(again, m, nil, pidfd.AllowSelf())
	require.NoError(t, err)
	require.NoError(t, imp.Close())

	// The ticket travels as text, alone or inside JSON.
	text, err := tk.MarshalText()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(text), "cuvmm-pidfd-v2:pid="+strconv.Itoa(os.Getpid())+":"), string(text))
	msg, err := json.Marshal(struct{ Memory pidfd.Ticket }{tk})
	require.NoError(t, err)
	var got struct{ Memory pidfd.Ticket }
	require.NoError(t, json.Unmarshal(msg, &got))
	require.Equal(t, tk, got.Memory)

	// A ticket that names the importer's own process is refused unless it asks for that.
	_, err = pidfd.Fetch(got.Memory)
	require.ErrorIs(t, err, ipc.ErrProtocol)
	require.ErrorContains(t, err, "the ticket names this process")
	require.ErrorContains(t, err, "AllowSelf")
	r, err := pidfd.Fetch(got.Memory, pidfd.AllowSelf())
	skipRefused(t, err)
	require.NoError(t, err)
	require.Equal(t, e.Header, r.Header)
	fds := r.FDs()
	require.Len(t, fds, 3)
	for _, fd := range fds {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		require.NoError(t, err)
		require.NotZero(t, flags&unix.FD_CLOEXEC, "fetched close-on-exec")
	}
	imp, err = ipc.Import(m, r, []int{0})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	data := make([]byte, imp.Size())
	_, err = imp.ReadAt(data, 0)
	require.NoError(t, err)
	require.Equal(t, vmmtest.Pattern(seed, int(8*mib)), data)
	require.NoError(t, imp.Close())

	// The exporter keeps its descriptors: a second importer fetches them again.
	imp, err = pidfd.FetchAndImport(tk, m, nil, pidfd.AllowSelf())
	require.NoError(t, err)
	require.Equal(t, uint64(8*mib), imp.Size())
	require.NoError(t, imp.Close())

	// Close withdraws the ticket: the manifest is gone (its number not open, or open on
	// something that is no manifest with this secret).
	require.NoError(t, e.Close())
	_, err = pidfd.Fetch(tk, pidfd.AllowSelf())
	if errors.Is(err, unix.EBADF) {
		require.ErrorContains(t, err, fmt.Sprintf("the manifest (descriptor %d) is not open in process %d", tk.Manifest, tk.PID))
		require.ErrorContains(t, err, "Exported.Close withdraws the ticket")
	} else {
		require.ErrorIs(t, err, ipc.ErrProtocol)
	}
	_, err = pidfd.Publish(e)
	require.ErrorIs(t, err, vmm.ErrClosed)

	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	requireOpenFDs(t, before, "descriptors leaked")

	_, err = pidfd.Publish(nil)
	require.ErrorIs(t, err, vmm.ErrInvalid)
}

// withSecret is tk with its secret replaced by hex digits sec.
func withSecret(t *testing.T, tk pidfd.Ticket, sec string) pidfd.Ticket {
	t.Helper()
	text, err := tk.MarshalText()
	require.NoError(t, err)
	i := strings.LastIndex(string(text), "=")
	forged, err := pidfd.ParseTicket(string(text[:i+1]) + sec)
	require.NoError(t, err)
	return forged
}

// secretOf is tk's secret, in hex.
func secretOf(t *testing.T, tk pidfd.Ticket) string {
	text, err := tk.MarshalText()
	require.NoError(t, err)
	return string(text[strings.LastIndex(string(text), "=")+1:])
}

// The confused deputy the ticket's first version allowed: a client hands an importing
// service a ticket that names memory the service can reach but that was never exported
// for the ticket. With one process playing both parts (the strongest case: pidfd_getfd on
// oneself is always allowed), a genuine ticket of one export pointed at another export's
// manifest, or at one of the exported descriptors, or with its secret changed, takes
// nothing; what the refusal says gives away no secret.
func TestTicketGrantsOnlyItsExport(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	ticketGrantsOnlyItsExport(t, s, func() [4]int { return live(s.Stats()) })
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

func ticketGrantsOnlyItsExport(t *testing.T, be vmm.Backend, held func() [4]int) {
	m := vmm.New(be)
	var allocs []*vmm.Allocation
	for _, size := range []uint64{2 * mib, 4 * mib} {
		a, err := m.Create(size, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR})
		require.NoError(t, err)
		defer a.Close()
		allocs = append(allocs, a)
	}
	e, err := ipc.Export(m, allocs...)
	require.NoError(t, err)
	defer e.Close()
	other, err := ipc.Export(m, allocs[1])
	require.NoError(t, err)
	defer other.Close()
	mine, err := pidfd.Publish(e)
	require.NoError(t, err)
	theirs, err := pidfd.Publish(other)
	require.NoError(t, err)
	// The genuine ticket grants its export (and, on the real driver, opens the descriptors
	// the driver keeps after a first import before anything is counted).
	imp, err := pidfd.FetchAndImport(theirs, m, nil, pidfd.AllowSelf())
	skipRefused(t, err)
	require.NoError(t, err)
	require.Equal(t, uint64(4*mib), imp.Size())
	require.NoError(t, imp.Close())
	before := held()
	refused := func(tk pidfd.Ticket, says ...string) {
		t.Helper()
		mid := openFDs(t)
		imp, err := pidfd.FetchAndImport(tk, m, nil, pidfd.AllowSelf())
		require.Nil(t, imp)
		require.ErrorIs(t, err, ipc.ErrProtocol)
		for _, s := range says {
			require.ErrorContains(t, err, s)
		}
		for _, secret := range []string{secretOf(t, mine), secretOf(t, theirs)} {
			require.NotContains(t, err.Error(), secret[:8])
		}
		requireOpenFDs(t, mid, "every descriptor fetched is closed")
		require.Equal(t, before, held(), "nothing imported")
	}
	// Another export's manifest: the secret does not match.
	forged := mine
	forged.Manifest = theirs.Manifest
	refused(forged, "the ticket's secret is not the manifest's")
	// Each descriptor of the exports, named as the manifest: none is one.
	for _, fd := range append(e.FDs(), other.FDs()...) {
		forged.Manifest = fd
		refused(forged, fmt.Sprintf("descriptor %d of process %d is not a ticket's manifest", fd, os.Getpid()))
	}
	// The right manifest, another secret.
	refused(withSecret(t, mine, strings.Repeat("0", 64)), "the ticket's secret is not the manifest's")
	refused(withSecret(t, mine, secretOf(t, theirs)), "the ticket's secret is not the manifest's")
	// The same ticket, without AllowSelf.
	_, err = pidfd.FetchAndImport(mine, m, nil)
	require.ErrorContains(t, err, "the ticket names this process")
	imp, err = pidfd.FetchAndImport(mine, m, nil, pidfd.AllowSelf())
	require.NoError(t, err)
	require.Equal(t, uint64(6*mib), imp.Size())
	require.NoError(t, imp.Close())
}

// live is what st says is held.
func live(st sim.Stats) [4]int {
	return [4]int{st.Handles, st.Allocations, st.Reservations, st.Mappings}
}

// fileFD is a descriptor of c, valid while c is open.
func fileFD(t *testing.T, c *net.UnixConn) int {
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	var fd int
	require.NoError(t, rc.Control(func(f uintptr) { fd = int(f) }))
	return fd
}

// aThread is the id of a thread of this process other than its main thread.
func aThread(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != os.Getpid() {
			return tid
		}
	}
	t.Skip("a process of one thread")
	return 0
}

// A ticket that lies: every case fetches (and imports what it fetched) in this process,
// with AllowSelf, and its exporter is this process; after each every descriptor fetched is
// closed and sim holds what it held before. What a forged manifest can say is
// TestFetchHostileManifest's.
func TestFetchHostileTicket(t *testing.T) {
	type ticketCase struct {
		name   string
		ticket func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket // from the fixture's true ticket
		is     []error
		says   []string
	}
	// closedFD is a descriptor number not open here, and above those Fetch opens: the number
	// of a descriptor just closed is the next one the kernel gives (the pidfd, say).
	closedFD := func(t *testing.T) int {
		const high = 1000
		_, err := unix.FcntlInt(high, unix.F_GETFD, 0)
		require.ErrorIs(t, err, unix.EBADF)
		return high
	}
	manifest := func(fd func(*testing.T, *fixture) int) func(*testing.T, *fixture, pidfd.Ticket) pidfd.Ticket {
		return func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.Manifest = fd(t, fx)
			return tk
		}
	}
	notManifest := []error{ipc.ErrProtocol}
	cases := []ticketCase{
		{name: "no such process", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.PID = 1 << 22 // above the largest pid_max: never a process
			return tk
		}, is: []error{os.ErrProcessDone, unix.ESRCH}, says: []string{"process 4194304 is gone"}},
		{name: "a process that has exited", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			cmd := reexec.Command(os.Args[0], "-test.run=^$")
			require.NoError(t, cmd.Run())
			tk.PID = cmd.Process.Pid
			return tk
		}, is: []error{os.ErrProcessDone}},
		{name: "another start time", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.Start++
			return tk
		}, is: []error{os.ErrProcessDone}, says: []string{"is not the exporter: it started at another time", "its pid was reused"}},
		{name: "a thread's id", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.PID = aThread(t)
			return tk
		}, is: []error{ipc.ErrProtocol}, says: []string{"is not a process (a thread's id?)"}},
		{name: "pid 0", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.PID = 0
			return tk
		}, is: []error{ipc.ErrProtocol}, says: []string{"pid 0 (1 to 4194304)"}},
		{name: "another boot", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.Boot = "00000000-0000-0000-0000-000000000000"
			return tk
		}, is: []error{ipc.ErrProtocol}, says: []string{"another machine or before a reboot", "FabricHandle"}},
		{name: "a boot id that is not one", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.Boot = strings.ToUpper(tk.Boot)
			return tk
		}, is: []error{ipc.ErrProtocol}, says: []string{"not a lowercase UUID"}},
		{name: "another pid namespace", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			tk.PIDNS++
			return tk
		}, is: []error{ipc.ErrProtocol}, says: []string{"another pid namespace", "shareProcessNamespace"}},
		{name: "a manifest not open", ticket: manifest(func(t *testing.T, _ *fixture) int { return closedFD(t) }),
			is: []error{unix.EBADF}, says: []string{"the manifest (descriptor 1000) is not open in process"}},
		{name: "a manifest past any table", ticket: manifest(func(*testing.T, *fixture) int { return 1<<31 - 1 }),
			is: []error{unix.EBADF}, says: []string{"the manifest (descriptor 2147483647) is not open"}},
		{name: "an exported descriptor", ticket: manifest(func(_ *testing.T, fx *fixture) int { return fx.cuda[1] }),
			is: notManifest, says: []string{"is not a ticket's manifest"}},
		{name: "a pipe", ticket: manifest(func(_ *testing.T, fx *fixture) int { return int(fx.pipeR.Fd()) }),
			is: notManifest, says: []string{"is not a ticket's manifest (not a sealed memory file)"}},
		{name: "a socket", ticket: manifest(func(t *testing.T, _ *fixture) int {
			a, z := socketpair(t, unix.SOCK_STREAM)
			t.Cleanup(func() { a.Close(); z.Close() })
			return fileFD(t, a)
		}), is: notManifest, says: []string{"(not a sealed memory file)"}},
		{name: "a directory", ticket: manifest(func(t *testing.T, _ *fixture) int {
			d, err := os.Open(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			return int(d.Fd())
		}), is: notManifest, says: []string{"(not a sealed memory file)"}},
		{name: "/dev/null", ticket: manifest(func(_ *testing.T, fx *fixture) int { return fx.devnull() }),
			is: notManifest, says: []string{"(not a sealed memory file)"}},
		{name: "a regular file", ticket: manifest(func(_ *testing.T, fx *fixture) int { return int(fx.file.Fd()) }),
			is: notManifest, says: []string{"(not a sealed memory file)"}},
		{name: "another secret", ticket: func(t *testing.T, fx *fixture, tk pidfd.Ticket) pidfd.Ticket {
			return withSecret(t, tk, strings.Repeat("ab", 32))
		}, is: []error{ipc.ErrProtocol}, says: []string{"the ticket's secret is not the manifest's"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := openFDs(t)
			fx := newFixture(t)
			t.Cleanup(func() {
				failed := t.Failed()
				fx.close(t)
				if !failed {
					requireOpenFDs(t, before, "descriptors left open")
				}
			})
			tk, err := pidfd.Publish(fx.e)
			require.NoError(t, err)
			start, sec := strconv.FormatUint(tk.Start, 10), secretOf(t, tk)
			tk = c.ticket(t, fx, tk)
			held := fx.s.Stats()
			mid := openFDs(t)
			imp, err := pidfd.FetchAndImport(tk, fx.m, []int{0}, pidfd.AllowSelf())
			require.Nil(t, imp)
			require.Error(t, err)
			skipRefused(t, err)
			t.Log(err)
			for _, is := range c.is {
				require.ErrorIs(t, err, is)
			}
			for _, s := range c.says {
				require.Contains(t, err.Error(), s)
			}
			// Never the right answer: the true start time, boot id, namespace or secret.
			boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
			for _, s := range []string{" " + start, strings.TrimSpace(string(boot)), sec[:8]} {
				require.NotContains(t, err.Error(), s)
			}
			var ie *vmm.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "pidfd", ie.Pkg)
			require.Equal(t, "fetch", ie.Op)
			requireOpenFDs(t, mid, "every descriptor fetched is closed")
			require.Equal(t, live(held), live(fx.s.Stats()), "a failed fetch leaves nothing behind")
		})
	}
}

// The most descriptors one export has, one allocation's many times over: granted, fetched,
// imported, mapped one after another.
func TestFetchMaxDescriptors(t *testing.T) {
	before := openFDs(t)
	fx := newFixture(t)
	allocs := make([]*vmm.Allocation, ipc.MaxDescriptors)
	for i := range allocs {
		allocs[i] = fx.allocs[0]
	}
	e, err := ipc.Export(fx.m, allocs...)
	require.NoError(t, err)
	tk, err := pidfd.Publish(e)
	require.NoError(t, err)
	r, err := pidfd.Fetch(tk, pidfd.AllowSelf())
	skipRefused(t, err)
	require.NoError(t, err)
	require.Len(t, r.FDs(), ipc.MaxDescriptors)
	imp, err := ipc.Import(fx.m, r, nil)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, uint64(ipc.MaxDescriptors*2)*mib, imp.Size())
	require.NoError(t, imp.Close())
	require.NoError(t, e.Close())
	fx.close(t)
	requireOpenFDs(t, before)
}

// The kernel's own refusal: a child running as another user (nobody) may not take this
// process's descriptors, and is told why and what to do. Root only (to start the child as
// another user).
func TestFetchAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a child as another user needs root")
	}
	const nobody = 65534
	fx := newFixture(t)
	defer fx.close(t)
	tk, err := pidfd.Publish(fx.e)
	require.NoError(t, err)
	text, err := tk.MarshalText()
	require.NoError(t, err)
	// The test binary, where nobody can run it: go test's build directory is root's alone.
	dir, err := os.MkdirTemp("", "cuvmm-pidfd-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "ipc.test")
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))

	cmd := reexec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), envPidfdFetch+"="+string(text))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	var pe *os.PathError
	if errors.As(err, &pe) || errors.Is(err, exec.ErrNotFound) {
		t.Skipf("cannot start the test binary as nobody: %v", err)
	}
	require.NoError(t, err, "%s", out)
	t.Logf("%s", out)
	if strings.HasPrefix(string(out), "permission=false unsupported=true") {
		t.Skipf("this kernel has no pidfd_getfd: %s", out)
	}
	require.True(t, strings.HasPrefix(string(out), fmt.Sprintf("permission=true unsupported=false uid=%d\n", nobody)), "%s", out)
	require.Contains(t, string(out), fmt.Sprintf("this process may not take descriptors of process %d (operation not permitted)", os.Getpid()))
	require.Contains(t, string(out), "needs ptrace access to the exporter")
	require.Contains(t, string(out), fmt.Sprintf("process %d runs as uid 0 (or is not dumpable), this one as uid %d", os.Getpid(), nobody))
}

func TestAllowImporter(t *testing.T) {
	require.ErrorIs(t, pidfd.AllowImporter(-1), vmm.ErrInvalid)
	// The parent of this process, then nobody; without Yama neither changes anything.
	require.NoError(t, pidfd.AllowImporter(os.Getppid()))
	require.NoError(t, pidfd.AllowAnyImporter())
	require.NoError(t, pidfd.AllowImporter(0))
	if _, err := os.Stat("/proc/sys/kernel/yama"); err == nil {
		err := pidfd.AllowImporter(1 << 22)
		require.ErrorIs(t, err, os.ErrProcessDone, "Yama refuses a pid that is no process")
	}
}
