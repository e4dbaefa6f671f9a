package loader

import (
	"io/fs"
	"os"
)

// notRegular returns why path cannot be a shared library when it names something other than a
// regular file (after symbolic links): a FIFO, a directory, a device, a socket. The system
// loader opens whatever it is given and reads it, and a FIFO with no writer blocks that open
// forever. It returns "" for a regular file and for a path that cannot be examined, whose
// reason the system loader then reports itself.
//
// The check is a stat, not an open(O_RDONLY|O_NONBLOCK) and fstat: opening a device runs its
// driver's open routine (which arms /dev/watchdog, for one), and since dlopen and LoadLibraryEx
// take a name and open it again, a descriptor of our own would not narrow the window between
// the check and the load. That window remains: a name replaced by a FIFO in between still
// blocks the load. Only someone who can write to that directory can do so, and they could as
// well put a library of their choosing there; the check is against mistakes (an override
// pointing at the wrong thing), not against them. Closing the window would need loading
// through a descriptor (dlopen of /proc/self/fd/N), which would give the driver a link-map
// name that is not its file's; there is no such thing on Windows. Names without a directory
// are searched by the system loader and not checked here, and a regular file on a file
// system that never answers (a hung network mount) still blocks.
func notRegular(path string) string {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().IsRegular() {
		return ""
	}
	return "not a regular file: " + fileKind(fi.Mode())
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file (" + m.Type().String() + ")"
}
