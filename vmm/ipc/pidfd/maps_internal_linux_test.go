package pidfd

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// deepFile creates a file of 4 KiB whose path is about total bytes long, of directories of
// 250 bytes made relative to each other (no path argument is past PATH_MAX), and returns
// its descriptor.
func deepFile(t *testing.T, total int) int {
	t.Helper()
	top := t.TempDir()
	t.Cleanup(func() { exec.Command("rm", "-rf", top).Run() }) // deeper than os.RemoveAll goes
	dir, err := unix.Open(top, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	require.NoError(t, err)
	name := strings.Repeat("d", 250)
	for l := 0; l < total; l += len(name) + 1 {
		require.NoError(t, unix.Mkdirat(dir, name, 0o700))
		next, err := unix.Openat(dir, name, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		require.NoError(t, err)
		unix.Close(dir)
		dir = next
	}
	fd, err := unix.Openat(dir, "f", unix.O_CREAT|unix.O_RDWR, 0o600)
	unix.Close(dir)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Ftruncate(fd, 4096))
	return fd
}

// mapFirst maps the first page of fd, one line of /proc/self/maps (the kernel places each
// mapping below the last; mappings of offset 0 never merge).
func mapFirst(t *testing.T, fd int) {
	t.Helper()
	b, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(b) })
}

func statOf(t *testing.T, fd int) unix.Stat_t {
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	return st
}

// A line of /proc/PID/maps longer than any buffer (a path past PATH_MAX, 70 KiB) before
// the manifest's line: madeBy skips its path and finds the manifest.
func TestMadeByLongLine(t *testing.T) {
	mem := deepFile(t, 0)
	mapFirst(t, mem)
	mapFirst(t, deepFile(t, 70<<10)) // below the manifest: read first
	require.NoError(t, madeBy(os.Getpid(), statOf(t, mem)))
}

// An exporter whose maps pass maxMaps is refused once that much is read, rather than read
// for as long as it makes the file (4 GiB of paths took more than a minute).
func TestMadeByTooManyMaps(t *testing.T) {
	long := deepFile(t, 3800)
	for range maxMaps/4000 + 100 {
		mapFirst(t, long)
	}
	err := madeBy(os.Getpid(), statOf(t, deepFile(t, 0)))
	require.ErrorIs(t, err, errProtocol)
	require.ErrorContains(t, err, "over 64 MiB")
	require.False(t, errors.Is(err, os.ErrNotExist))
}
