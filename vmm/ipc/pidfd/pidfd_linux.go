package pidfd

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/ipc/internal/fds"
	"golang.org/x/sys/unix"
)

// The system calls Fetch makes, replaced by tests that inject the kernel's refusals.
var (
	pidfdOpen  = unix.PidfdOpen
	pidfdGetfd = unix.PidfdGetfd
	// yamaScope is where Yama says who may ptrace whom; "" where the kernel has no Yama.
	yamaScope = "/proc/sys/kernel/yama/ptrace_scope"
)

// manifestSeals keep a manifest's bytes and size as the exporter wrote them, and its seals
// as they are.
const manifestSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// Publish makes a ticket that grants an importer that fetches with pidfd_getfd (Fetch) e's
// descriptors, and nothing else of this process: it writes the manifest the ticket names,
// which e holds from then on. Each call makes a ticket of its own. e keeps its descriptors,
// and must stay open until every importer has fetched: Close withdraws every ticket of it
// before it closes the descriptors.
func Publish(e *ipc.Exported) (Ticket, error) {
	var t Ticket
	err := e.Publish(func(h ipc.Header, fds []int) (withdraw func() error, err error) {
		t, withdraw, err = publish(h, fds)
		return withdraw, err
	})
	return t, opError("publish", "", err)
}

// publish writes the manifest of fds (one per size of h) with a new secret into a sealed
// memory file, maps it, and returns the ticket that names it and what unmaps and closes it.
// The mapping is the exporter's mark: a sealed memory file can be passed from process
// to process, but only the exporter's own code maps its manifests, so an importer that
// finds the file mapped in the exporter (/proc/PID/maps) knows the exporter made it, and
// not a peer that left one in the exporter's descriptor table.
func publish(h ipc.Header, fds []int) (Ticket, func() error, error) {
	t, err := self()
	if err != nil {
		return Ticket{}, nil, err
	}
	m := manifest{header: h}
	for i, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return Ticket{}, nil, fmt.Errorf("descriptor %d of allocation %d: %w", fd, i, err)
		}
		m.files = append(m.files, manifestFile{fd: fd, dev: uint64(st.Dev), ino: uint64(st.Ino)})
	}
	if _, err := rand.Read(m.secret[:]); err != nil {
		return Ticket{}, nil, fmt.Errorf("a secret for the ticket: %w", err)
	}
	b, err := m.encode()
	if err != nil {
		return Ticket{}, nil, err
	}
	fd, err := unix.MemfdCreate("cuvmm-ticket-manifest", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return Ticket{}, nil, fmt.Errorf("memfd_create for the manifest: %w", err)
	}
	fail := func(err error) (Ticket, func() error, error) {
		unix.Close(fd)
		return Ticket{}, nil, err
	}
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		if err != nil {
			return fail(fmt.Errorf("writing the manifest: %w", err))
		}
		off += n
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, manifestSeals); err != nil {
		return fail(fmt.Errorf("sealing the manifest: %w", err))
	}
	mapped, err := unix.Mmap(fd, 0, len(b), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fail(fmt.Errorf("mapping the manifest: %w", err))
	}
	t.Manifest, t.secret = fd, m.secret
	return t, func() error { return errors.Join(unix.Munmap(mapped), unix.Close(fd)) }, nil
}

// self is this process as a ticket names it.
var self = cached(func() (Ticket, error) {
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return Ticket{}, err
	}
	boot, err := bootID()
	if err != nil {
		return Ticket{}, err
	}
	ns, err := pidNamespace()
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{PID: pid, Start: start, Boot: boot, PIDNS: ns}, nil
})

// cached returns f's first result without an error, and calls f until it has one.
func cached[T any](f func() (T, error)) func() (T, error) {
	var mu sync.Mutex
	var v T
	var ok bool
	return func() (T, error) {
		mu.Lock()
		defer mu.Unlock()
		if ok {
			return v, nil
		}
		got, err := f()
		if err != nil {
			return got, err
		}
		v, ok = got, true
		return v, nil
	}
}

// startTime is the start time of process pid in clock ticks after boot: field 22 of its stat,
// read from its main thread's entry (/proc/PID/task/PID/stat, the same number), which
// qemu-user passes to the kernel where it answers /proc/self/stat and /proc/PID/stat of its
// own process itself.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold anything: fields start
	// after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/task/%d/stat: no command name", pid, pid)
	}
	f := strings.Fields(string(b[i+1:]))
	const at = 22 - 3 // field 3 comes first
	if len(f) <= at {
		return 0, fmt.Errorf("/proc/%d/task/%d/stat: %d fields", pid, pid, len(f)+2)
	}
	n, err := strconv.ParseUint(f[at], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/task/%d/stat: start time: %w", pid, pid, err)
	}
	return n, nil
}

// bootID is this boot's id; it does not change while the process runs.
var bootID = cached(func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if !validBootID(id) {
		return "", fmt.Errorf("boot id %q is not a lowercase UUID", id)
	}
	return id, nil
})

// pidNamespace is the inode of this process's pid namespace, which never changes.
var pidNamespace = cached(func() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("pid namespace: %w", err)
	}
	return uint64(st.Ino), nil
})

// Fetch takes copies of the descriptors a ticket grants from the exporting process, with
// pidfd_open and pidfd_getfd (Linux 5.6+), and returns them as an *ipc.Received to import
// (ipc.Import) as if they had come over a socket (FetchAndImport does both). On error every
// descriptor fetched is closed. Descriptors are fetched close-on-exec.
//
// The ticket is not trusted. Before any system call Fetch checks its form, that it was made
// on this machine since its last boot and in this pid namespace, and that it does not name
// this process (see AllowSelf). It then checks that the process it reaches is the one that
// made the ticket (its start time) and still runs, and takes the manifest: a sealed memory
// file that the exporter maps, whose secret must be the ticket's. It takes only the
// descriptors the manifest lists, each of which must be open on the file the manifest names
// and not on a socket, pipe, directory or block device, and last finds the manifest still
// in place, so that the exporter had not withdrawn the ticket (Exported.Close) while they
// were taken. A refusal says which check failed, never what would have passed it.
//
// Errors say what the kernel refused and what to do about it: where the kernel has no
// pidfd_getfd (before Linux 5.6, or a seccomp filter refuses it) the error matches
// ipc.ErrUnsupported and vmm.ErrUnsupported; where this process may not take the exporter's
// descriptors (pidfd_getfd needs ptrace access to it) the error matches os.ErrPermission
// and names the remedies (AllowImporter in the exporter is one); where the exporter has
// exited, os.ErrProcessDone; a ticket that cannot be true or grants nothing, ipc.ErrProtocol.
// The error of a refused system call also unwraps to the kernel's errno (unix.EBADF where
// a descriptor is not open).
func Fetch(t Ticket, opts ...FetchOption) (*ipc.Received, error) {
	var o fetchOpts
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	h, fds, err := fetch(t, o)
	if err != nil {
		return nil, opError("fetch", "ticket of process "+strconv.Itoa(t.PID), err)
	}
	return ipc.NewReceived(h, fds), nil
}

func fetch(t Ticket, o fetchOpts) (h ipc.Header, taken []int, err error) {
	if err := t.validate(); err != nil {
		return ipc.Header{}, nil, err
	}
	boot, err := bootID()
	if err != nil {
		return ipc.Header{}, nil, err
	}
	if t.Boot != boot {
		return ipc.Header{}, nil, fmt.Errorf("%w: the ticket was made on another machine or before a reboot (its boot id is not this one's): "+
			"pidfd_getfd reaches processes of this machine only; fabric handles (FabricHandle) cross machines", errProtocol)
	}
	ns, err := pidNamespace()
	if err != nil {
		return ipc.Header{}, nil, err
	}
	if t.PIDNS != ns {
		return ipc.Header{}, nil, fmt.Errorf("%w: the exporter is of another pid namespace than this process: "+
			"share one (Kubernetes: shareProcessNamespace in the pod, or hostPID) or use the socket transport (Send and Receive)", errProtocol)
	}
	if t.PID == os.Getpid() && !o.self {
		return ipc.Header{}, nil, fmt.Errorf("%w: the ticket names this process; a ticket from a peer that names its importer "+
			"would have it import its own memory (AllowSelf takes such a ticket)", errProtocol)
	}
	pidfd, err := pidfdOpen(t.PID, 0)
	if err != nil {
		return ipc.Header{}, nil, refuse("pidfd_open", err, t, "")
	}
	defer unix.Close(pidfd)
	// The pidfd holds the process, not its pid: while the process runs, its pid is its own,
	// so a start time read now, and a process seen running after, are the ticket's.
	start, err := startTime(t.PID)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return ipc.Header{}, nil, refuse("pidfd_open", unix.ESRCH, t, "")
	}
	if err != nil {
		return ipc.Header{}, nil, err
	}
	if start != t.Start {
		return ipc.Header{}, nil, &refusal{
			what:   fmt.Sprintf("process %d is not the exporter: it started at another time than the ticket says", t.PID),
			err:    unix.ESRCH,
			remedy: "the exporter has exited and its pid was reused; a new ticket is needed",
			is:     []error{os.ErrProcessDone},
		}
	}
	if exited(pidfd) {
		return ipc.Header{}, nil, refuse("pidfd_open", unix.ESRCH, t, "")
	}
	take := func(fd int, what string) (int, error) {
		got, err := pidfdGetfd(pidfd, fd, 0)
		if errors.Is(err, unix.EBADF) && exited(pidfd) {
			// A process that has exited has no descriptors left.
			err = unix.ESRCH
		}
		if err != nil {
			return -1, refuse("pidfd_getfd", err, t, what)
		}
		return got, nil
	}
	mfd, err := take(t.Manifest, fmt.Sprintf("the manifest (descriptor %d)", t.Manifest))
	if err != nil {
		return ipc.Header{}, nil, err
	}
	defer fds.CloseForeign([]int{mfd})
	m, file, err := readManifest(mfd, &t)
	if err != nil {
		return ipc.Header{}, nil, err
	}
	if err := madeBy(t.PID, file); err != nil {
		return ipc.Header{}, nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, fds.CloseForeign(taken))
			taken = nil
		}
	}()
	for i, f := range m.files {
		fd, err := take(f.fd, fmt.Sprintf("descriptor %d (allocation %d)", f.fd, i))
		if err != nil {
			return ipc.Header{}, taken, err
		}
		taken = append(taken, fd)
		st, err := fds.Stat(fd)
		if err != nil {
			return ipc.Header{}, taken, fmt.Errorf("statx of descriptor %d fetched from process %d: %w", f.fd, t.PID, err)
		}
		if kind := fds.NotMemory(uint32(st.Mode)); kind != "" {
			return ipc.Header{}, taken, fmt.Errorf("%w: descriptor %d of process %d (allocation %d) is %s, not memory", errProtocol, f.fd, t.PID, i, kind)
		}
		if unix.Mkdev(st.Dev_major, st.Dev_minor) != f.dev || st.Ino != f.ino {
			return ipc.Header{}, taken, fmt.Errorf("%w: descriptor %d of process %d (allocation %d) is not open on the file the manifest names: "+
				"the exporter closed it and the number was reused", errProtocol, f.fd, t.PID, i)
		}
	}
	// The exporter closes the manifest before the descriptors it lists: found again, it
	// says that those just taken are the ones it listed.
	again, err := take(t.Manifest, fmt.Sprintf("the manifest (descriptor %d)", t.Manifest))
	if err == nil {
		err = sameFile(again, file)
		fds.CloseForeign([]int{again})
	}
	if err != nil {
		return ipc.Header{}, taken, fmt.Errorf("%w: the exporter withdrew the ticket while its descriptors were taken: %w", errProtocol, err)
	}
	return m.header, taken, nil
}

// readManifest reads and checks the manifest open on fd against t's secret: a sealed memory
// file (asked first, which no other file system is asked to answer), no larger than any
// manifest, read without moving any shared file offset. It also returns the file.
func readManifest(fd int, t *Ticket) (manifest, unix.Stat_t, error) {
	var st unix.Stat_t
	notManifest := func(why string) (manifest, unix.Stat_t, error) {
		return manifest{}, st, fmt.Errorf("%w: descriptor %d of process %d is not a ticket's manifest (%s)", errProtocol, t.Manifest, t.PID, why)
	}
	if s, err := fds.Seals(fd); err != nil || s&manifestSeals != manifestSeals {
		return notManifest("not a sealed memory file")
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return manifest{}, st, fmt.Errorf("fstat of the manifest: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= 0 || st.Size > maxManifestLen {
		return notManifest("its size")
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return manifest{}, st, fmt.Errorf("reading the manifest: %w", err)
		}
		if n == 0 {
			return notManifest("its size")
		}
		off += n
	}
	m, err := decodeManifest(b, &t.secret)
	return m, st, err
}

// maxMaps is the most of an exporter's /proc/PID/maps that madeBy reads (a second or so):
// a process of 65,530 mappings of 1 KiB paths has 64 MiB; one that has more is refused.
const maxMaps = 64 << 20

// madeBy checks that process pid maps the manifest file (see publish): that the exporter
// made it, and not a peer that left a sealed memory file of its own in the exporter's
// descriptor table for a forged ticket to name.
func madeBy(pid int, file unix.Stat_t) error {
	// Read a line at a time, at most maxMaps bytes: the exporter decides how long the file
	// is (up to vm.max_map_count lines of a path each, no PATH_MAX on a path printed here).
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return fmt.Errorf("the exporter's mappings: %w", err)
	}
	defer maps.Close()
	// ADDRESS PERMS OFFSET MAJOR:MINOR INODE [PATH], the device in hex.
	dev := fmt.Appendf(nil, "%02x:%02x", unix.Major(uint64(file.Dev)), unix.Minor(uint64(file.Dev)))
	ino := strconv.AppendUint(nil, uint64(file.Ino), 10)
	lr := &io.LimitedReader{R: maps, N: maxMaps}
	r := bufio.NewReader(lr)
	for {
		line, err := r.ReadSlice('\n') // a long line's start holds the fields; its path is skipped
		if f := bytes.Fields(line); len(f) >= 5 && bytes.Equal(f[3], dev) && bytes.Equal(f[4], ino) {
			return nil
		}
		for err == bufio.ErrBufferFull {
			_, err = r.ReadSlice('\n')
		}
		if err == io.EOF && lr.N == 0 {
			return fmt.Errorf("%w: the exporter's mappings are over %d MiB: too many to look for the manifest in", errProtocol, maxMaps>>20)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("the exporter's mappings: %w", err)
		}
	}
	return fmt.Errorf("%w: the manifest bears the ticket's secret but process %d did not make it (it does not map it): "+
		"a sealed memory file that another process left there", errProtocol, pid)
}

// sameFile says whether descriptor fd is open on file, the manifest: a sealed memory file
// (asked first, as readManifest does, which no other file system is asked to answer) of
// its device and inode (from the kernel's cached attributes).
func sameFile(fd int, file unix.Stat_t) error {
	moved := errors.New("another file stands at the manifest's descriptor")
	if s, err := fds.Seals(fd); err != nil || s&manifestSeals != manifestSeals {
		return moved
	}
	st, err := fds.Stat(fd)
	if err != nil {
		return fmt.Errorf("statx of the manifest: %w", err)
	}
	if unix.Mkdev(st.Dev_major, st.Dev_minor) != uint64(file.Dev) || st.Ino != uint64(file.Ino) {
		return moved
	}
	return nil
}

// exited is whether the process of pidfd has exited (its pidfd is readable then).
func exited(pidfd int) bool {
	p := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(p, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && p[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
	}
}

// refuse says why the kernel refused call (pidfd_open, pidfd_getfd) for t, and what to do
// about it; what names the exporter's descriptor asked for, or is "".
func refuse(call string, err error, t Ticket, what string) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s: %w", call, err)
	}
	switch errno {
	case unix.ENOSYS:
		return &refusal{
			what:   fmt.Sprintf("%s is not available on this kernel (%s)", call, kernelRelease()),
			err:    errno,
			remedy: "Linux 5.6 or later is needed (a seccomp filter that refuses the call has the same effect); use the socket transport (Send and Receive)",
			is:     []error{vmm.ErrUnsupported, ipc.ErrUnsupported},
		}
	case unix.EPERM, unix.EACCES:
		return &refusal{
			what:   fmt.Sprintf("%s: this process may not take descriptors of process %d", call, t.PID),
			err:    errno,
			remedy: permissionRemedy(t.PID),
		}
	case unix.ESRCH:
		return &refusal{
			what:   fmt.Sprintf("process %d is gone", t.PID),
			err:    errno,
			remedy: "the exporter has exited, and its descriptors with it (or the ticket names no process); the exporter must run until the importer has fetched",
			is:     []error{os.ErrProcessDone},
		}
	case unix.EBADF:
		if what != "" {
			return &refusal{
				what:   fmt.Sprintf("%s is not open in process %d", what, t.PID),
				err:    errno,
				remedy: "the exporter closed it (ipc.Exported.Close withdraws the ticket), or the ticket is wrong; the exporter must keep the Exported open until the importer has fetched",
			}
		}
	case unix.EINVAL, unix.ENOENT:
		// A thread's id: EINVAL, and ENOENT since Linux 6.9.
		if call == "pidfd_open" {
			return &refusal{
				what: fmt.Sprintf("pid %d is not a process (a thread's id?)", t.PID),
				err:  errno,
				is:   []error{ipc.ErrProtocol},
			}
		}
	}
	if what != "" {
		return fmt.Errorf("%s of %s of process %d: %w", call, what, t.PID, errno)
	}
	return fmt.Errorf("%s of process %d: %w", call, t.PID, errno)
}

// permissionRemedy says how a process gets ptrace access to process pid, which pidfd_getfd
// needs (PTRACE_MODE_ATTACH_REALCREDS), and what stands in the way here.
func permissionRemedy(pid int) string {
	s := "pidfd_getfd needs ptrace access to the exporter: both processes of the same user (uid and gid) and the exporter dumpable, " +
		"with kernel.yama.ptrace_scope 0, or 1 and this process an ancestor of the exporter or named by it " +
		"(prctl(PR_SET_PTRACER): AllowImporter in the exporter); or CAP_SYS_PTRACE in this process; " +
		"a container's seccomp profile may refuse the call too; else use the socket transport (Send and Receive)"
	var here []string
	if yamaScope != "" {
		if b, err := os.ReadFile(yamaScope); err == nil {
			scope := strings.TrimSpace(string(b))
			switch scope {
			case "2":
				scope += ", which leaves CAP_SYS_PTRACE the only way"
			case "3":
				scope += ", which forbids it to every process until a reboot"
			}
			here = append(here, "kernel.yama.ptrace_scope is "+scope)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid), &st); err == nil && int(st.Uid) != os.Geteuid() {
		// /proc/PID belongs to the process's effective uid, or to root where it is not dumpable.
		here = append(here, fmt.Sprintf("process %d runs as uid %d (or is not dumpable), this one as uid %d", pid, st.Uid, os.Geteuid()))
	}
	if len(here) > 0 {
		s += "; here " + strings.Join(here, "; ")
	}
	return s
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "release unknown"
	}
	return "Linux " + unix.ByteSliceToString(u.Release[:])
}

// FetchAndImport fetches the descriptors t grants (Fetch), imports and maps them with
// access for the devices of access (ipc.Import), and closes the descriptors it fetched
// whatever happens.
func FetchAndImport(t Ticket, m *vmm.Manager, access []int, opts ...FetchOption) (*ipc.Imported, error) {
	r, err := Fetch(t, opts...)
	if err != nil {
		return nil, err
	}
	imp, err := ipc.Import(m, r, access)
	if cerr := r.Close(); cerr != nil {
		if imp != nil {
			cerr = errors.Join(cerr, imp.Close())
		}
		return nil, errors.Join(err, cerr)
	}
	return imp, err
}

// prSetPtracerAny is PR_SET_PTRACER_ANY, (unsigned long)-1.
const prSetPtracerAny = ^uintptr(0)

// AllowImporter lets process pid take this process's descriptors with pidfd_getfd where
// Yama's kernel.yama.ptrace_scope is 1 (Ubuntu's default), which otherwise allows only this
// process's ancestors: the exporter calls it with the importer's pid before the importer
// fetches. It is prctl(PR_SET_PTRACER, pid), so it also lets pid ptrace this process, and a
// process names one such process at a time: a later call replaces it, and pid 0 names none.
// It changes nothing at ptrace_scope 0 (the same user suffices), 2 or 3 (CAP_SYS_PTRACE or
// nothing), nor where the kernel has no Yama, and then returns nil.
func AllowImporter(pid int) error {
	if pid < 0 {
		return opError("allow importer", strconv.Itoa(pid), fmt.Errorf("%w: a negative pid", vmm.ErrInvalid))
	}
	err := setPtracer(uintptr(pid))
	return opError("allow importer", strconv.Itoa(pid), err)
}

// AllowAnyImporter lets every process take this process's descriptors with pidfd_getfd, and
// ptrace it, as far as Yama decides (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)): at
// kernel.yama.ptrace_scope 1, any process of the same user. Only where the importer's pid is
// not known in advance; AllowImporter(0) takes it back. Without Yama it changes nothing and
// returns nil.
func AllowAnyImporter() error {
	err := setPtracer(prSetPtracerAny)
	return opError("allow importer", "any", err)
}

func setPtracer(arg uintptr) error {
	err := unix.Prctl(unix.PR_SET_PTRACER, arg, 0, 0, 0)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EINVAL) {
		if _, serr := os.Stat("/proc/sys/kernel/yama"); errors.Is(serr, os.ErrNotExist) {
			return nil // no Yama: nothing to allow
		}
		if arg != prSetPtracerAny && arg != 0 {
			return &refusal{what: fmt.Sprintf("no process %d", arg), err: err, is: []error{os.ErrProcessDone}}
		}
	}
	return fmt.Errorf("prctl(PR_SET_PTRACER): %w", err)
}
