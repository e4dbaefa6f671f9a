//go:build unix && !linux

package sim

import (
	"os"

	"golang.org/x/sys/unix"
)

// openNoFollow opens path for reading and writing, refusing a symbolic link. (Linux opens
// shared memory through /proc/self/fd instead: share_linux.go.)
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
}
