package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// newShareFile creates the backing file of an exportable allocation: an anonymous memfd,
// sparse, so size costs nothing until written. Fabric allocations need no named file on
// Linux: importers reach the memfd through /proc/<pid>/fd/<fd>.
func newShareFile(name string, size uint64, _ string) (*os.File, string, error) {
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

// fabricPath is unused on Linux (the token names the exporter's descriptor).
func fabricPath(pid int, sim, id uint64) string { return "" }

// describeFile returns the size and owning device of a descriptor sim exported: a memfd
// whose name starts with shareName.
func describeFile(f *os.File) (size uint64, dev int, ok bool) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !strings.HasPrefix(link, "/memfd:"+shareName) {
		return 0, 0, false
	}
	rest := strings.TrimPrefix(link, "/memfd:"+shareName)
	if i := strings.IndexByte(rest, ' '); i >= 0 {
		rest = rest[:i]
	}
	dev, err = strconv.Atoi(rest)
	if err != nil {
		return 0, 0, false
	}
	st, err := f.Stat()
	if err != nil || st.Size() <= 0 {
		return 0, 0, false
	}
	return uint64(st.Size()), dev, true
}

// openFabric opens the exporter's memfd through /proc and checks it is the same file.
func openFabric(ref fabricRef) (*os.File, error) {
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/%d", ref.pid, ref.fd), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if k := keyOf(f); k.ino != ref.ino {
		f.Close()
		return nil, fmt.Errorf("descriptor %d of process %d is another file now", ref.fd, ref.pid)
	}
	return f, nil
}
