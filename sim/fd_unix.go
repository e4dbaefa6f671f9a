//go:build unix

package sim

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// dupFD returns a new descriptor of the file fd is open on, for the caller to own.
func dupFD(fd uintptr) (int, error) { return unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }

// keyOf identifies the allocation a descriptor holds by its file's device and inode and,
// in an arena, its file offset (an export's says where its allocation is), so two
// descriptors of one allocation match.
func keyOf(f *os.File) fileKey {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return fileKey{}
	}
	off, err := unix.Seek(int(f.Fd()), 0, io.SeekCurrent)
	if err != nil || off < 0 {
		off = 0
	}
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino), off: uint64(off)}
}

// fileResident is the host memory a sparse file holds.
func fileResident(f *os.File) uint64 {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0
	}
	return uint64(st.Blocks) * 512
}
