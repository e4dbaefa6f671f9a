package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// writeOutput writes data to the file the user named. vmmprobe often runs as root
// (node-feature-discovery's features.d, a DaemonSet), so it never replaces what the path
// names behind the user's back:
//
//   - a regular file, or a path that does not exist yet, is replaced atomically: data goes
//     to a temporary file in the same directory, which is synced and renamed over it, so a
//     reader (node-feature-discovery scanning its directory, say) sees the old content or
//     the new one, never a part;
//   - a symbolic link is followed, and what it points to is written as above (the link
//     stays a link);
//   - this process's standard output or error is written through its descriptor, whatever
//     it is: --output-file /dev/stdout works;
//   - anything else (a character device such as /dev/null, a named pipe) is written to in
//     place, opened without creating or truncating it and, for a pipe, without waiting for
//     a reader: /dev/null stays a device, and /dev/full reports that it is full;
//   - a directory is refused.
//
// Errors name the path as the user gave it.
func writeOutput(path string, data []byte) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("output file %s: %w", path, err)
		}
	}()
	if fi, err := os.Stat(path); err == nil && stdio(fi) != nil {
		// Not resolved: /dev/stdout leads to "pipe:[N]" for a pipe, and a file it leads to
		// must not be replaced under the redirection (> log) that opened it.
		_, err = stdio(fi).Write(data)
		return err
	}
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A path that does not exist, or a link to one: create what the link names.
		if target, err = danglingTarget(path); err != nil {
			return err
		}
		return replace(target, data)
	}
	if err != nil {
		return err
	}
	fi, err := os.Stat(target)
	switch {
	case err != nil:
		return err
	case fi.Mode().IsRegular():
		return replace(target, data)
	case fi.IsDir():
		return errors.New("is a directory")
	}
	return writeInPlace(target, data)
}

// danglingTarget returns the path a file at path is created at: path itself, or, for a
// symbolic link to a file that does not exist, the link's destination (resolved relative to
// the link's directory).
func danglingTarget(path string) (string, error) {
	for range 40 { // as many links as Linux follows
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(dest) {
			// Not filepath.Join, which would take "dir/link/.." away as text: the kernel
			// resolves ".." from where a link in the path leads.
			dir, _ := filepath.Split(path)
			dest = dir + dest
		}
		path = dest
	}
	return "", errors.New("too many levels of symbolic links")
}

// replace writes data to a temporary file next to path and renames it over path.
func replace(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// writeInPlace writes data to an existing file that is not a regular one: opened for
// writing only, never created or truncated, and without blocking on a pipe that has no
// reader (that is an error, ENXIO, rather than a hang).
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|oNonblock, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// stdio returns this process's standard output or error when fi is the file it writes to.
func stdio(fi fs.FileInfo) *os.File {
	if runtime.GOOS == "windows" {
		return nil // every pipe and device has file ID 0 there: SameFile would match them all
	}
	for _, f := range []*os.File{os.Stdout, os.Stderr} {
		if sfi, err := f.Stat(); err == nil && os.SameFile(fi, sfi) {
			return f
		}
	}
	return nil
}
