package loader

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// loadWithin loads lib and fails the test if that takes longer than limit, which is what a
// FIFO handed to dlopen does (it waits for a writer forever). On a timeout it opens fifo for
// writing and closes it, so the blocked dlopen reads end-of-file and the goroutine ends.
func loadWithin(t *testing.T, lib *Library, fifo string, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- lib.Load() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			_ = unix.Close(fd)
		}
		t.Fatalf("Load did not return within %v: the library file was opened as it is", limit)
		return nil
	}
}

func TestNonRegularFileRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "libcuda.so.1")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	link := filepath.Join(dir, "libcuda-link.so.1")
	require.NoError(t, os.Symlink(fifo, link))

	for _, tc := range []struct {
		name, path, why string
	}{
		{"fifo", fifo, "a named pipe (FIFO)"},
		{"symlink to a fifo", link, "a named pipe (FIFO)"},
		{"directory", dir, "a directory"},
		{"character device", "/dev/null", "a character device"},
	} {
		for _, via := range []string{"WithPath", EnvPath} {
			t.Run(tc.name+" via "+via, func(t *testing.T) {
				var lib *Library
				if via == EnvPath {
					t.Setenv(EnvPath, tc.path)
					lib = New()
				} else {
					lib = New(WithPath(tc.path))
				}
				err := loadWithin(t, lib, fifo, 10*time.Second)
				require.ErrorIs(t, err, ErrNoDriver)
				var le *LoadError
				require.ErrorAs(t, err, &le)
				require.Equal(t, []string{tc.path}, le.Tried)
				require.Equal(t, "not a regular file: "+tc.why, le.Reasons[0])
				require.Contains(t, err.Error(), tc.path+": not a regular file: "+tc.why)
			})
		}
	}
}

// A regular file still reaches dlopen, whose own reason is reported.
func TestRegularFileReachesDlopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libcuda.so.1")
	require.NoError(t, os.WriteFile(path, []byte("not an ELF file"), 0o600))
	err := New(WithPath(path)).Load()
	require.ErrorIs(t, err, ErrNoDriver)
	var le *LoadError
	require.ErrorAs(t, err, &le)
	require.Equal(t, []string{path}, le.Tried)
	require.NotContains(t, le.Reasons[0], "not a regular file")
}

// NVML's path is checked like the driver's, through its own variable.
func TestNVMLPathNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	t.Setenv(EnvNVMLPath, fifo)
	l := &Library{kind: nvmlKind, src: systemSource()}
	err := loadWithin(t, l, fifo, 10*time.Second)
	require.ErrorIs(t, err, ErrNoDriver)
	require.EqualError(t, err, "loader: cannot load the NVML library: "+fifo+": not a regular file: a named pipe (FIFO)")
}
