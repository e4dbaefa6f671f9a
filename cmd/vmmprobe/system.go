package main

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/cuvmm/cuvmm/nvml"
)

// system is what vmmprobe reads about the node apart from the CUDA driver: files under
// /proc, /sys, /dev, /etc, /run and /usr, and NVML. The real one reads this machine
// (hostSystem); a simulated node and the tests provide one made of data (memSystem), so
// that one set of rules reads both and every rule is tested without a GPU.
//
// Everything a system returns is hostile until checked: files are read with a size bound
// and parsed defensively, directories are listed with a count bound.
type system interface {
	// ReadFile returns the named file, at most maxRead bytes of it.
	ReadFile(name string) ([]byte, error)
	// ReadDir returns the names in a directory, sorted, at most maxDirEntries of them.
	ReadDir(name string) ([]string, error)
	// Stat describes what name names, following links.
	Stat(name string) (fileInfo, error)
	// CanOpen says whether this process can open name for reading: nil, or why not.
	CanOpen(name string) error
	// NVML is NVML's snapshot of the node.
	NVML() nvml.Node
	// Linux reports whether the node is Linux: Fabric Manager, NVSwitch and IMEX are read
	// only there.
	Linux() bool
	// Simulated reports whether the node is simulated: remedies then name no command.
	Simulated() bool
}

// fileInfo is what Stat says: the mode and, for a device, its major number.
type fileInfo struct {
	Mode  fs.FileMode
	Major uint32
}

// errNotRegular refuses to read what is not a regular file (a FIFO would block).
var errNotRegular = errors.New("not a regular file")

// Bounds on what is read from the node.
const (
	maxRead       = 1 << 20
	maxDirEntries = 1 << 16
)

// hostSystem is this machine: its files (under root, "" for the real root; tests pass a
// directory laid out like one) and its NVML.
type hostSystem struct {
	root string
	// probe takes NVML's snapshot (nvml.Probe; tests replace it).
	probe func() nvml.Node
}

func newHostSystem() *hostSystem { return &hostSystem{probe: nvml.Probe} }

func (h *hostSystem) path(name string) string { return filepath.Join(h.root, filepath.FromSlash(name)) }

func (h *hostSystem) ReadFile(name string) ([]byte, error) {
	// Opened without following into a FIFO's wait: /proc and /sys files are regular, and a
	// path that is something else is refused before anything is read.
	p := h.path(name)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: name, Err: errNotRegular}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxRead))
}

func (h *hostSystem) ReadDir(name string) ([]string, error) {
	f, err := os.Open(h.path(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(maxDirEntries)
	if err != nil && len(names) == 0 && err != io.EOF {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func (h *hostSystem) Stat(name string) (fileInfo, error) {
	p := h.path(name)
	fi, err := os.Stat(p)
	if err != nil {
		return fileInfo{}, err
	}
	return fileInfo{Mode: fi.Mode(), Major: deviceMajor(p, fi)}, nil
}

// CanOpen opens name read-only and closes it again. It is used for IMEX channel files,
// whose opening has no side effect (it is what the driver does); O_NONBLOCK keeps a
// path that turned out to be a FIFO from waiting for a writer.
func (h *hostSystem) CanOpen(name string) error {
	f, err := os.OpenFile(h.path(name), os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

func (h *hostSystem) NVML() nvml.Node { return h.probe() }
func (h *hostSystem) Linux() bool     { return runtime.GOOS == "linux" }
func (h *hostSystem) Simulated() bool { return false }

// memFile is a file of a memSystem: its content, its mode (0 for a regular file) and, for
// a device, its major number; denied makes opening it fail.
type memFile struct {
	data   string
	mode   fs.FileMode
	major  uint32
	denied error
}

// memSystem is a node made of data: a simulated node, or a test's.
type memSystem struct {
	files     map[string]memFile // by absolute path; directories are implied by their files
	nvml      nvml.Node
	linux     bool
	simulated bool
}

func newMemSystem(simulated bool) *memSystem {
	return &memSystem{files: map[string]memFile{}, linux: true, simulated: simulated}
}

func (m *memSystem) add(name string, f memFile) { m.files[path.Clean(name)] = f }

// dir adds an empty directory (a directory with files needs no entry of its own).
func (m *memSystem) dir(name string) { m.add(name, memFile{mode: fs.ModeDir}) }

func (m *memSystem) ReadFile(name string) ([]byte, error) {
	f, ok := m.files[path.Clean(name)]
	switch {
	case !ok && m.isDir(name):
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	case !ok:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case f.denied != nil:
		return nil, &fs.PathError{Op: "open", Path: name, Err: f.denied}
	}
	b := []byte(f.data)
	return b[:min(len(b), maxRead)], nil
}

// isDir reports whether name is a directory: one added as such, or one with files under it.
func (m *memSystem) isDir(name string) bool {
	name = path.Clean(name)
	if f, ok := m.files[name]; ok {
		return f.mode.IsDir()
	}
	prefix := strings.TrimSuffix(name, "/") + "/"
	for p := range m.files {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func (m *memSystem) ReadDir(name string) ([]string, error) {
	if !m.isDir(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	prefix := strings.TrimSuffix(path.Clean(name), "/") + "/"
	seen := map[string]bool{}
	for p := range m.files {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" {
			first, _, _ := strings.Cut(rest, "/")
			seen[first] = true
		}
	}
	names := slices.Sorted(maps.Keys(seen))
	return names[:min(len(names), maxDirEntries)], nil
}

func (m *memSystem) Stat(name string) (fileInfo, error) {
	if f, ok := m.files[path.Clean(name)]; ok {
		return fileInfo{Mode: f.mode, Major: f.major}, nil
	}
	if m.isDir(name) {
		return fileInfo{Mode: fs.ModeDir}, nil
	}
	return fileInfo{}, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

func (m *memSystem) CanOpen(name string) error {
	f, ok := m.files[path.Clean(name)]
	if !ok {
		return &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if f.denied != nil {
		return &fs.PathError{Op: "open", Path: name, Err: f.denied}
	}
	return nil
}

func (m *memSystem) NVML() nvml.Node { return m.nvml }
func (m *memSystem) Linux() bool     { return m.linux }
func (m *memSystem) Simulated() bool { return m.simulated }
