//go:build unix

package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestOutputFileNeverReplacesWhatThePathNames runs the labels output into each kind of file
// a path can name and checks what is left there: a device stays a device, a link stays a
// link, and a write that fails exits 1 naming the path.
func TestOutputFileNeverReplacesWhatThePathNames(t *testing.T) {
	want := runWith(t, noDriver, "--backend=sim", "-o", "labels").stdout
	write := func(path string) outcome {
		return runWith(t, noDriver, "--backend=sim", "-o", "labels", "--output-file", path)
	}

	t.Run("device node", func(t *testing.T) {
		// A copy of /dev/null (character device 1:3): run as root, the output must not turn
		// the host's /dev/null into a regular file.
		dev := filepath.Join(t.TempDir(), "null")
		if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Skipf("cannot make a device node here (%v): needs root outside a restricted container", err)
		}
		r := write(dev)
		require.Equal(t, exitOK, r.code, r.stderr)
		fi, err := os.Lstat(dev)
		require.NoError(t, err)
		assert.Equal(t, fs.ModeDevice|fs.ModeCharDevice, fi.Mode().Type(), "still a character device")
	})

	t.Run("dev null", func(t *testing.T) {
		r := write("/dev/null")
		require.Equal(t, exitOK, r.code, r.stderr)
		fi, err := os.Lstat("/dev/null")
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&fs.ModeCharDevice)
	})

	t.Run("dev full", func(t *testing.T) {
		if _, err := os.Stat("/dev/full"); err != nil {
			t.Skip("no /dev/full")
		}
		r := write("/dev/full")
		assert.Equal(t, exitFailure, r.code)
		assert.Contains(t, r.stderr, "output file /dev/full: ")
		assert.Contains(t, r.stderr, "no space left on device")
	})

	t.Run("symbolic link", func(t *testing.T) {
		dir := t.TempDir()
		target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
		require.NoError(t, os.WriteFile(target, []byte("old\\n"), 0o644))
		require.NoError(t, os.Symlink("target", link))
		r := write(link)
		require.Equal(t, exitOK, r.code, r.stderr)
		fi, err := os.Lstat(link)
		require.NoError(t, err)
		assert.Equal(t, fs.ModeSymlink, fi.Mode().Type(), "the link stays a link")
		got, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), "what it points to has the output")
	})

	t.Run("dangling link", func(t *testing.T) {
		dir := t.TempDir()
		link := filepath.Join(dir, "link")
		require.NoError(t, os.Symlink("new", link))
		r := write(link)
		require.Equal(t, exitOK, r.code, r.stderr)
		got, err := os.ReadFile(filepath.Join(dir, "new"))
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
		fi, _ := os.Lstat(link)
		assert.Equal(t, fs.ModeSymlink, fi.Mode().Type())
	})

	t.Run("dangling link with .. reached through a link", func(t *testing.T) {
		// alias -> real/sub; real/sub/out -> ../want/out: the kernel resolves ".." from
		// real/sub, so real/want/out is what the path names.
		dir := t.TempDir()
		sub := filepath.Join(dir, "real", "sub")
		require.NoError(t, os.MkdirAll(sub, 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "real", "want"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "want"), 0o755))
		require.NoError(t, os.Symlink(sub, filepath.Join(dir, "alias")))
		require.NoError(t, os.Symlink("../want/out", filepath.Join(sub, "out")))
		r := write(filepath.Join(dir, "alias", "out"))
		require.Equal(t, exitOK, r.code, r.stderr)
		got, err := os.ReadFile(filepath.Join(dir, "real", "want", "out"))
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
		assert.NoFileExists(t, filepath.Join(dir, "want", "out"))
	})

	t.Run("pipe without reader", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		done := make(chan outcome, 1)
		go func() { done <- write(fifo) }()
		select {
		case r := <-done:
			assert.Equal(t, exitFailure, r.code, "nobody reads the pipe")
			assert.Contains(t, r.stderr, "output file "+fifo+": ")
		case <-time.After(10 * time.Second):
			t.Fatal("writing to a pipe without a reader hung")
		}
		fi, _ := os.Lstat(fifo)
		assert.Equal(t, fs.ModeNamedPipe, fi.Mode().Type(), "still a pipe")
	})

	t.Run("pipe with reader", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		rd, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
		require.NoError(t, err)
		defer rd.Close()
		r := write(fifo)
		require.Equal(t, exitOK, r.code, r.stderr)
		var got bytes.Buffer
		buf := make([]byte, 1<<16)
		for got.Len() < len(want) {
			n, err := rd.Read(buf)
			got.Write(buf[:n])
			if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
		}
		assert.Equal(t, want, got.String())
	})
}
