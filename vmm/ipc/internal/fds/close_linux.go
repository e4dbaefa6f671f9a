package fds

import "golang.org/x/sys/unix"

// CloseForeign closes descriptors that another process sent or let this one take without
// waiting on their file systems. Closing a file asks its file system to flush it (FUSE sends
// FLUSH and waits for an answer that a hostile server never gives; a socket may linger), so
// a memory file, a dma-buf and a descriptor of the NVIDIA driver's devices (where it opens
// every export), whose close asks no one, and a descriptor not open are closed at once, and
// each other one on a goroutine of its own, which CloseForeign does not wait for. It
// returns the errors of the closes at once.
//
// A close that never returns holds an OS thread (its descriptor's number is free at once:
// close(2) takes it out of the table first). At most maxClosing such closes run at a time,
// so a peer that floods this process with files that never answer costs it that many
// threads, well below Go's limit of 10,000 (past which the process dies), and beyond them
// a parked goroutine and an open descriptor each, until the file system answers or its
// connection ends (its server exits, or /sys/fs/fuse/connections/N/abort).
func CloseForeign(fds []int) error {
	var now []int
	for _, fd := range fds {
		if _, err := Seals(fd); err == nil || err == unix.EBADF || kernelDmaBuf(fd) || nvidiaDevice(fd) {
			now = append(now, fd)
		} else {
			go closeLater(fd)
		}
	}
	return Close(now)
}

// maxClosing covers the descriptors of one message (at most 253).
const maxClosing = 256

// closing holds a token for each close running in the background.
var closing = make(chan struct{}, maxClosing)

func closeLater(fd int) {
	closing <- struct{}{}
	unix.Close(fd)
	<-closing
}

// nvidiaMajor is the character device major of the NVIDIA driver's /dev/nvidia* files.
const nvidiaMajor = 195

// nvidiaDevice says whether fd is open on one of the NVIDIA driver's character devices;
// statx from the kernel's cached attributes asks no file system.
func nvidiaDevice(fd int) bool {
	st, err := Stat(fd)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev_major == nvidiaMajor
}
