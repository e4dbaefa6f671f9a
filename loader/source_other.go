//go:build !linux && !windows

package loader

import "runtime"

// noSource is the source of systems NVIDIA ships no driver for.
type noSource struct{}

func systemSource() source { return noSource{} }

func cudaPaths() []string { return nil }

func nvmlPaths() []string { return nil }

func (noSource) open([]string, bool) (string, error) {
	return "", &LoadError{Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

func (noSource) lookup(string) (uintptr, error) { return 0, ErrUnsupportedPlatform }

func (noSource) hasGetProcAddress() bool { return false }

func (noSource) getProcAddress(string, int, uint64) (uintptr, int32, int32) {
	return 0, 0, 0
}
