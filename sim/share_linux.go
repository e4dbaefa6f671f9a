package sim

import (
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// newShareFile creates the backing file of an exportable allocation: an anonymous memfd,
// sparse, so size costs nothing until written. Fabric allocations need no named file on
// Linux: importers reach the memfd through /proc/<pid>/fd/<fd>.
func newShareFile(name string, size uint64, _ bool) (*os.File, string, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, "", fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, "", err
	}
	return f, "", nil
}

// memfdName returns the name of the memfd open on fd, or false if fd is not a memfd.
func memfdName(fd int) (string, bool) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", false
	}
	name, ok := strings.CutPrefix(link, "/memfd:")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(name, " (deleted)"), true
}

// describeFile returns the size and device of a descriptor another process exported: a
// memfd named as sim names them.
func describeFile(f *os.File) (size uint64, dev int, ok bool) {
	name, ok := memfdName(int(f.Fd()))
	if !ok {
		return 0, 0, false
	}
	if dev, _, ok = parseFileName(name); !ok {
		return 0, 0, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() <= 0 {
		return 0, 0, false
	}
	return uint64(st.Size()), dev, true
}

// openFabric opens the memfd a fabric token leads to in another process. The path comes
// from the token, so nothing is opened for reading or writing until the file is known to
// bear the token's device and secret: first a path-only descriptor (O_PATH: no open of
// the file itself, so no device, pipe or regular file is touched), whose target must be a
// memfd named with them; then the same file, reopened through that descriptor.
func openFabric(tok fabricToken) (*os.File, error) {
	pfd, err := unix.Open(fmt.Sprintf("/proc/%d/fd/%d", tok.pid, tok.fd), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	name, ok := memfdName(pfd)
	if !ok {
		return nil, fmt.Errorf("descriptor %d of process %d is not a sim allocation", tok.fd, tok.pid)
	}
	// The device too: the importer takes the token's device for the memory's.
	if dev, secret, ok := parseFileName(name); !ok || dev != int(tok.dev) || secret != hex.EncodeToString(tok.secret[:]) {
		return nil, fmt.Errorf("descriptor %d of process %d is not the token's allocation", tok.fd, tok.pid)
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	var a, b unix.Stat_t
	if unix.Fstat(pfd, &a) != nil || unix.Fstat(fd, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		f.Close()
		return nil, fmt.Errorf("descriptor %d of process %d changed while it was opened", tok.fd, tok.pid)
	}
	return f, nil
}
