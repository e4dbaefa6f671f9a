package fds

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What a descriptor from another process (received over a socket or taken with
// pidfd_getfd) must be before anything reads, maps or imports it. No check waits on the
// file's file system: a FUSE server that does not answer would hang fstat, so types come
// from the kernel's cached attributes (statx with AT_STATX_DONT_SYNC) and anything else is
// asked only once the file is known to be memory (shmem) or a dma-buf.

// Stat is what the kernel has cached of fd's file: its type, size, blocks, device and
// inode.
func Stat(fd int) (unix.Statx_t, error) {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC,
		unix.STATX_TYPE|unix.STATX_INO|unix.STATX_SIZE|unix.STATX_BLOCKS, &st)
	return st, err
}

// NotMemory names a file type that no exported allocation has, "" for the others: a regular
// file (sim's memfd), a character device (the NVIDIA driver's) or an anonymous inode, which
// has no type.
func NotMemory(mode uint32) string { return notMemory[mode&unix.S_IFMT] }

var notMemory = map[uint32]string{
	unix.S_IFSOCK: "a socket", unix.S_IFIFO: "a pipe", unix.S_IFDIR: "a directory",
	unix.S_IFLNK: "a symbolic link", unix.S_IFBLK: "a block device",
}

// Seals returns the seals of fd, a memfd; an error for any other file, at once.
func Seals(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0) }

// Memory refuses a descriptor of allocation i that cannot be memory: a socket, pipe,
// directory or block device, or a memory file sealed against writes (a ticket's manifest
// or a dma-buf, which no allocation is, and which a peer could otherwise leave in this
// process for a forged ticket to name).
func Memory(fd, i int) error {
	st, err := Stat(fd)
	if err != nil {
		return fmt.Errorf("statx of the descriptor of allocation %d: %w", i, err)
	}
	if kind := NotMemory(uint32(st.Mode)); kind != "" {
		return fmt.Errorf("%w: the descriptor of allocation %d is %s, not memory", ErrProtocol, i, kind)
	}
	if s, err := Seals(fd); err == nil && s&unix.F_SEAL_WRITE != 0 {
		return fmt.Errorf("%w: the descriptor of allocation %d is a sealed memory file, not memory", ErrProtocol, i)
	}
	return nil
}

// simDmaBufName starts the name of the memfd of a dma-buf that sim exported (sim's
// dmaBufName; the dma-buf tests on sim fail if the two part).
const simDmaBufName = "cuvmm-sim.dmabuf:"

// simDmaBufSeals are the seals sim puts on such a memfd.
const simDmaBufSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// DmaBuf refuses a descriptor that is neither a dma-buf (a file of the kernel's
// dma-buf file system) nor a dma-buf that sim exported: a memfd so named and sealed, of a
// whole number of pages and holding no data (sim's describe the range; they are never
// written).
func DmaBuf(fd int) error {
	if kernelDmaBuf(fd) {
		return nil
	}
	// What /proc/self/fd says fd is open on ("/memfd:NAME (deleted)"); reading it asks no
	// file system.
	var link string
	buf := make([]byte, 512)
	if n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf); err == nil {
		link = string(buf[:n])
	}
	st, err := Stat(fd)
	if err != nil {
		return fmt.Errorf("statx of the descriptor: %w", err)
	}
	if kind := NotMemory(uint32(st.Mode)); kind != "" {
		return fmt.Errorf("%w: the descriptor is %s, not a dma-buf", ErrProtocol, kind)
	}
	s, err := Seals(fd)
	page := uint64(os.Getpagesize())
	if err != nil || s&simDmaBufSeals != simDmaBufSeals || !strings.HasPrefix(link, "/memfd:"+simDmaBufName) ||
		st.Blocks != 0 || st.Size == 0 || st.Size%page != 0 {
		return fmt.Errorf("%w: the descriptor is not a dma-buf", ErrProtocol)
	}
	return nil
}

// kernelDmaBuf says whether fd is a dma-buf of the kernel's: /proc/self/fd's link names one
// ("/dmabuf:NAME", or "anon_inode:dmabuf" on older kernels) and its /proc/self/fdinfo has
// the exporter's name (dma_buf_show_fdinfo). Neither alone will do: a file so named on a
// detached mount has the link, and older kernels print the names of the files an io_uring
// registered, unescaped, in the io_uring's fdinfo. Both are written by the kernel from the
// open file without asking its file system. The read is bounded: the dma-buf's lines come
// after the locks any process placed on the file, which a peer could make many.
func kernelDmaBuf(fd int) bool {
	buf := make([]byte, 512)
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf)
	if link := string(buf[:max(n, 0)]); err != nil || !strings.HasPrefix(link, "/dmabuf:") && !strings.HasPrefix(link, "anon_inode:dmabuf") {
		return false
	}
	f, err := os.Open("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return strings.Contains(string(b), "\nexp_name:")
}

func closeFD(fd int) error { return unix.Close(fd) }
