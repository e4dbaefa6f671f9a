//go:build unix && !linux

package sim

import (
	"os"

	"golang.org/x/sys/unix"
)

// openNoFollow opens path for reading and writing, refusing a symbolic link (share_other.go;
// linux opens a path-only descriptor first instead).
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
}
