package ipc

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What a descriptor from another process (received over a socket or taken with
// pidfd_getfd) must be before anything reads, maps or imports it.

// notMemory names a file type that no exported allocation has, "" for the others: a regular
// file (sim's memfd), a character device (the NVIDIA driver's) or an anonymous inode, which
// has no type.
func notMemory(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFIFO:
		return "a pipe"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFBLK:
		return "a block device"
	}
	return ""
}

// checkMemoryFD refuses a descriptor of allocation i that cannot be memory.
func checkMemoryFD(fd, i int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat of the descriptor of allocation %d: %w", i, err)
	}
	if kind := notMemory(st.Mode); kind != "" {
		return fmt.Errorf("%w: the descriptor of allocation %d is %s, not memory", ErrProtocol, i, kind)
	}
	return nil
}

// simDmaBufName starts the name of the memfd of a dma-buf that sim exported (sim's
// dmaBufName; the dma-buf tests on sim fail if the two part).
const simDmaBufName = "cuvmm-sim.dmabuf:"

// simDmaBufSeals are the seals sim puts on such a memfd.
const simDmaBufSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// checkDmaBufFD refuses a descriptor that is neither a dma-buf (a file of the kernel's
// dma-buf file system) nor a dma-buf that sim exported (a memfd so named and sealed).
func checkDmaBufFD(fd int) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("fstatfs of the descriptor: %w", err)
	}
	if fs.Type == unix.DMA_BUF_MAGIC {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat of the descriptor: %w", err)
	}
	if kind := notMemory(st.Mode); kind != "" {
		return fmt.Errorf("%w: the descriptor is %s, not a dma-buf", ErrProtocol, kind)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&simDmaBufSeals != simDmaBufSeals || !strings.HasPrefix(memfdName(fd), simDmaBufName) {
		return fmt.Errorf("%w: the descriptor is not a dma-buf", ErrProtocol)
	}
	return nil
}

// memfdName is the name of the memfd open on fd, "" if it is not one.
func memfdName(fd int) string {
	buf := make([]byte, 512)
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf)
	if err != nil {
		return ""
	}
	name, ok := strings.CutPrefix(string(buf[:n]), "/memfd:")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(name, " (deleted)")
}
