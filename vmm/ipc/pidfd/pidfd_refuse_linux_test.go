package pidfd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// requireOpenFDs waits, 5 s at most, until n descriptors are open: a descriptor fetched
// that is neither memory nor a dma-buf (/dev/null) is closed on a goroutine of its own
// (fds.CloseForeign), which may not have run yet.
func requireOpenFDs(t *testing.T, n int, msgAndArgs ...any) {
	t.Helper()
	got := countFDs(t)
	for end := time.Now().Add(5 * time.Second); got != n && time.Now().Before(end); got = countFDs(t) {
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, n, got, msgAndArgs...)
}

// injected makes the n-th pidfd_getfd of the test (from 1) fail with errno, and pidfd_open
// fail with openErr if it is not 0; the others are the kernel's.
func injected(t *testing.T, openErr unix.Errno, n int, errno unix.Errno) {
	t.Helper()
	open, getfd := pidfdOpen, pidfdGetfd
	t.Cleanup(func() { pidfdOpen, pidfdGetfd = open, getfd })
	pidfdOpen = func(pid, flags int) (int, error) {
		if openErr != 0 {
			return -1, openErr
		}
		return open(pid, flags)
	}
	calls := 0
	pidfdGetfd = func(pidfd, fd, flags int) (int, error) {
		if calls++; calls == n {
			return -1, errno
		}
		return getfd(pidfd, fd, flags)
	}
}

// devnullTicket is a ticket of this process for three descriptors of /dev/null.
func devnullTicket(t *testing.T) Ticket {
	t.Helper()
	var fds []int
	for range 3 {
		f, err := os.Open(os.DevNull)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		fds = append(fds, int(f.Fd()))
	}
	h := ipc.Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: 2 << 20, Sizes: []uint64{2 << 20, 2 << 20, 2 << 20}}
	tk, withdraw, err := publish(h, fds)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, withdraw()) })
	return tk
}

// What the kernel's refusals say, and what they match, with the errors injected: the
// descriptors fetched before the refusal are closed.
func TestFetchRefusals(t *testing.T) {
	type refused struct {
		name    string
		open    unix.Errno // pidfd_open's error, or 0
		nth     int        // which pidfd_getfd fails
		errno   unix.Errno
		is, not []error
		says    []string
	}
	socket := "use the socket transport (Send and Receive)"
	for _, c := range []refused{
		{name: "no pidfd_open", open: unix.ENOSYS,
			is:   []error{vmm.ErrUnsupported, ipc.ErrUnsupported, unix.ENOSYS, errors.ErrUnsupported},
			not:  []error{os.ErrPermission, ipc.ErrProtocol},
			says: []string{"pidfd_open is not available on this kernel (Linux ", "Linux 5.6 or later is needed", "seccomp", socket}},
		{name: "no pidfd_getfd", nth: 1, errno: unix.ENOSYS,
			is:   []error{vmm.ErrUnsupported, ipc.ErrUnsupported, unix.ENOSYS},
			says: []string{"pidfd_getfd is not available on this kernel", "Linux 5.6 or later is needed", socket}},
		{name: "EPERM", nth: 2, errno: unix.EPERM,
			is:  []error{os.ErrPermission, unix.EPERM},
			not: []error{vmm.ErrUnsupported, ipc.ErrUnsupported, ipc.ErrProtocol},
			says: []string{"pidfd_getfd: this process may not take descriptors of process", "needs ptrace access to the exporter",
				"same user (uid and gid)", "dumpable", "kernel.yama.ptrace_scope 0, or 1 and this process an ancestor of the exporter",
				"prctl(PR_SET_PTRACER): AllowImporter in the exporter", "CAP_SYS_PTRACE", "seccomp", socket}},
		{name: "EACCES", nth: 3, errno: unix.EACCES,
			is:   []error{os.ErrPermission, unix.EACCES},
			says: []string{"may not take descriptors", "CAP_SYS_PTRACE"}},
		{name: "ESRCH", nth: 2, errno: unix.ESRCH,
			is:   []error{os.ErrProcessDone, unix.ESRCH},
			says: []string{"is gone (no such process)", "the exporter must run until the importer has fetched"}},
		{name: "ESRCH from pidfd_open", open: unix.ESRCH,
			is:   []error{os.ErrProcessDone, unix.ESRCH},
			says: []string{"is gone"}},
		{name: "EBADF", nth: 3, errno: unix.EBADF,
			is:   []error{unix.EBADF},
			not:  []error{os.ErrProcessDone},
			says: []string{"descriptor", "(allocation 1) is not open in process", "must keep the Exported open"}},
		{name: "EBADF for the manifest", nth: 1, errno: unix.EBADF,
			is:   []error{unix.EBADF},
			says: []string{"the manifest (descriptor", "is not open in process", "ipc.Exported.Close withdraws the ticket"}},
		{name: "the manifest gone after the descriptors", nth: 5, errno: unix.EBADF,
			is:   []error{ipc.ErrProtocol, unix.EBADF},
			says: []string{"the exporter withdrew the ticket while its descriptors were taken", "the manifest (descriptor"}},
		{name: "EINVAL from pidfd_open", open: unix.EINVAL,
			is:   []error{ipc.ErrProtocol, unix.EINVAL},
			says: []string{"is not a process (a thread's id?)"}},
		{name: "EMFILE", nth: 2, errno: unix.EMFILE,
			is:   []error{unix.EMFILE},
			not:  []error{ipc.ErrProtocol, os.ErrPermission},
			says: []string{"pidfd_getfd of descriptor", "(allocation 0) of process"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := devnullTicket(t)
			injected(t, c.open, c.nth, c.errno)
			before := countFDs(t)
			r, err := Fetch(tk, AllowSelf())
			require.Nil(t, r)
			for _, is := range c.is {
				require.ErrorIs(t, err, is)
			}
			for _, not := range c.not {
				require.NotErrorIs(t, err, not)
			}
			for _, s := range c.says {
				require.Contains(t, err.Error(), s)
			}
			var ie *vmm.Error
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "pidfd", ie.Pkg)
			require.Equal(t, "fetch", ie.Op)
			requireOpenFDs(t, before, "the descriptors fetched before the refusal are closed")
			t.Log(err)
		})
	}
}

// The remedy for a refused permission says what Yama's setting here allows, and whose the
// exporter is.
func TestPermissionRemedy(t *testing.T) {
	dir := t.TempDir()
	scope := yamaScope
	t.Cleanup(func() { yamaScope = scope })
	for _, c := range []struct{ scope, says string }{
		{"0", "here kernel.yama.ptrace_scope is 0"},
		{"1", "here kernel.yama.ptrace_scope is 1"},
		{"2", "here kernel.yama.ptrace_scope is 2, which leaves CAP_SYS_PTRACE the only way"},
		{"3", "here kernel.yama.ptrace_scope is 3, which forbids it to every process until a reboot"},
	} {
		yamaScope = filepath.Join(dir, "scope"+c.scope)
		require.NoError(t, os.WriteFile(yamaScope, []byte(c.scope+"\n"), 0o644))
		require.Contains(t, permissionRemedy(os.Getpid()), c.says)
	}
	yamaScope = filepath.Join(dir, "absent")
	require.NotContains(t, permissionRemedy(os.Getpid()), "; here ", "no Yama, the same user: nothing to add")
	yamaScope = ""
	require.NotContains(t, permissionRemedy(os.Getpid()), "ptrace_scope is")
	// /proc/1 is root's: a process of another user is named as such.
	if os.Geteuid() != 0 {
		require.Contains(t, permissionRemedy(1), fmt.Sprintf("process 1 runs as uid 0 (or is not dumpable), this one as uid %d", os.Geteuid()))
	}
}

// A refusal says what was refused, the kernel's words, and the remedy, in that order.
func TestRefusalText(t *testing.T) {
	err := refuse("pidfd_getfd", unix.EPERM, Ticket{PID: 42}, "descriptor 7")
	s := err.Error()
	i, j, k := strings.Index(s, "process 42"), strings.Index(s, "("+unix.EPERM.Error()+")"), strings.Index(s, "needs ptrace access")
	require.True(t, i >= 0 && i < j && j < k, s)
	require.ErrorIs(t, refuse("pidfd_open", fmt.Errorf("wrapped: %w", unix.ENOSYS), Ticket{PID: 42}, ""), vmm.ErrUnsupported)
	other := errors.New("not an errno")
	require.ErrorIs(t, refuse("pidfd_open", other, Ticket{PID: 42}, ""), other)
}
