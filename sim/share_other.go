//go:build !linux

package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// newShareFile creates the backing file of an exportable allocation: a sparse temporary
// file. Without memfd, a fabric allocation's file is named after its secret under
// os.TempDir, for importers in other processes to open; it is removed when the allocation
// is freed. Other files are unlinked at once where the platform allows it, and removed on
// close where it does not (Windows).
func newShareFile(name string, size uint64, fabric bool) (*os.File, string, error) {
	var f *os.File
	var err error
	if fabric {
		f, err = os.OpenFile(filepath.Join(os.TempDir(), name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
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
	if !fabric && os.Remove(f.Name()) == nil {
		remove = ""
	}
	return f, remove, nil
}

// notMemfd is false: without memfd, sim exports files of its own.
func notMemfd(int) bool { return false }

// describeFile reports no descriptor as another process's allocation: descriptors cross
// processes only on Linux (SCM_RIGHTS), and a file here carries nothing that proves it is
// one. Files this process exported are found by identity before this is asked.
func describeFile(*os.File) (store, uint64, int, bool) { return nil, 0, 0, false }

// newExportable makes the store of an allocation exportable only as a POSIX descriptor: a
// file of its own (the arena of exports is Linux's).
func newExportable(dev int, size uint64) (store, fileKey, error) {
	f, remove, err := newShareFile(fileName(dev, nil), size, false)
	if err != nil {
		return nil, fileKey{}, err
	}
	return &fileStore{f: f, remove: remove}, keyOf(f), nil
}

// exportFD returns a new descriptor of st's file for the caller to own.
func exportFD(st store) (int, error) { return dupFD(st.(*fileStore).f.Fd()) }

// openFabric opens the file a fabric token names: under os.TempDir, named after the
// token's device and its secret's digest, so a forged token names no file. It must be a regular file,
// not a link to one, and the file opened must be the one looked at.
func openFabric(tok fabricToken) (*os.File, error) {
	path := filepath.Join(os.TempDir(), fileName(int(tok.dev), &tok.secret))
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, errors.New("no allocation has this token")
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	if got, err := f.Stat(); err != nil || !os.SameFile(fi, got) {
		f.Close()
		return nil, fmt.Errorf("%s changed while it was opened", path)
	}
	return f, nil
}
