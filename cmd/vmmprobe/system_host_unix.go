//go:build unix

package main

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// deviceMajor is the major number of a device file, 0 for anything else.
func deviceMajor(path string, fi fs.FileInfo) uint32 {
	if fi.Mode()&fs.ModeDevice == 0 {
		return 0
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	return unix.Major(uint64(st.Rdev))
}

// oNonblock opens a pipe without waiting for the other end, a FIFO without waiting for a
// writer.
const oNonblock = unix.O_NONBLOCK
