package loader

import (
	"strings"

	"github.com/ebitengine/purego"
)

type dlSource struct {
	handle uintptr
	getPA
}

func systemSource() source { return &dlSource{} }

// libcuda.so.1 is the name the driver package installs; libcuda.so is usually only a
// development symlink (or a stub), so it is the second choice.
func cudaPaths() []string { return []string{"libcuda.so.1", "libcuda.so"} }

// libnvidia-ml.so.1 comes with the driver; libnvidia-ml.so is only a development symlink,
// or the CUDA toolkit's stub, which fails every call.
func nvmlPaths() []string { return []string{"libnvidia-ml.so.1"} }

func (s *dlSource) open(paths []string, _ bool) (string, error) {
	le := &LoadError{}
	for _, p := range paths {
		// A name with a slash is opened as it is (dlopen searches only for bare names), so it
		// must be a regular file: a FIFO would block dlopen forever (regular.go).
		why := ""
		if strings.ContainsRune(p, '/') {
			why = notRegular(p)
		}
		if why == "" {
			// RTLD_NOW surfaces unresolved dependencies here rather than at a later call.
			h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
			if err == nil {
				s.handle = h
				return p, nil
			}
			why = err.Error()
		}
		le.Tried = append(le.Tried, p)
		le.Reasons = append(le.Reasons, why)
	}
	return "", le
}

func (s *dlSource) lookup(name string) (uintptr, error) { return purego.Dlsym(s.handle, name) }

func (s *dlSource) hasGetProcAddress() bool {
	fn, _ := purego.Dlsym(s.handle, "cuGetProcAddress_v2")
	s.getPA = getPA(fn)
	return fn != 0
}
