//go:build unix

package main

import (
	"io/fs"
	"os"
	"strconv"
	"strings"

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

// describeDescriptor is the size of a descriptor this process holds (lseek to its end,
// which a dma-buf answers) and what the kernel says it is. It reads this process's own
// descriptor table (/proc/self/fd: the check runs on Linux only), not the node (which
// the system interface reads).
func describeDescriptor(fd int) (int64, string, error) {
	n, err := unix.Seek(fd, 0, unix.SEEK_END)
	if err != nil {
		return 0, "", err
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	switch {
	case err != nil:
		return n, "the kernel does not say what it is", nil
	case strings.Contains(link, "cuvmm-sim.dmabuf"):
		return n, "the simulator's stand-in, a memfd", nil
	case strings.Contains(link, "dmabuf"):
		return n, "a kernel dma-buf", nil
	}
	return n, "not a dma-buf: " + link, nil
}
