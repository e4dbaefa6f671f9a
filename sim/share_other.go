//go:build !linux

package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// newShareFile creates the backing file of an exportable allocation: a sparse temporary
// file. Without memfd, fabric allocations use a named file (path) that importers open; it
// is removed when the allocation is freed. Other files are unlinked at once where the
// platform allows it, and removed on close where it does not (Windows).
func newShareFile(name string, size uint64, path string) (*os.File, string, error) {
	var f *os.File
	var err error
	if path != "" {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	} else {
		f, err = os.CreateTemp("", name+"-*")
	}
	if err != nil {
		return nil, "", err
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, "", err
	}
	remove := f.Name()
	if path == "" && os.Remove(f.Name()) == nil {
		remove = ""
	}
	return f, remove, nil
}

// fabricPath names the file of a fabric allocation under os.TempDir.
func fabricPath(pid int, sim, id uint64) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("cuvmm-sim-fabric-%d-%d-%d", pid, sim, id))
}

// describeFile returns the size of a descriptor to import and its device, which only
// files this process created can tell (device 0 otherwise).
func describeFile(f *os.File) (size uint64, dev int, ok bool) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() <= 0 {
		return 0, 0, false
	}
	base := filepath.Base(f.Name())
	if i := strings.Index(base, shareName); i >= 0 {
		rest := base[i+len(shareName):]
		if j := strings.IndexByte(rest, '-'); j >= 0 {
			rest = rest[:j]
		}
		dev, _ = strconv.Atoi(rest)
	}
	return uint64(st.Size()), dev, true
}

func openFabric(ref fabricRef) (*os.File, error) {
	return os.OpenFile(fabricPath(ref.pid, ref.sim, ref.id), os.O_RDWR, 0)
}
