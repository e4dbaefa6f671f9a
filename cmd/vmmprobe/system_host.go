package main

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/cuvmm/cuvmm/nvml"
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
	sort.Strings(names)
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
