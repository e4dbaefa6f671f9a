//go:build windows

package sim

import (
	"os"

	"golang.org/x/sys/windows"
)

// On Windows a "POSIX descriptor" from sim is a duplicated file HANDLE value.

func dupFD(h uintptr) (int, error) {
	p := windows.CurrentProcess()
	var d windows.Handle
	err := windows.DuplicateHandle(p, windows.Handle(h), p, &d, 0, false, windows.DUPLICATE_SAME_ACCESS)
	return int(d), err
}

func keyOf(f *os.File) fileKey {
	var info windows.ByHandleFileInformation
	if windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &info) != nil {
		return fileKey{}
	}
	return fileKey{dev: uint64(info.VolumeSerialNumber), ino: uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow)}
}

func fileResident(f *os.File) uint64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return uint64(st.Size())
}

// openNoFollow opens path for reading and writing; the caller checks it opened the file it
// looked at (Windows has no O_NOFOLLOW).
func openNoFollow(path string) (*os.File, error) { return os.OpenFile(path, os.O_RDWR, 0) }
