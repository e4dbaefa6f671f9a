//go:build !unix && !windows

package sim

import (
	"errors"
	"os"
)

var errNoFD = errors.New("file descriptors are not supported on this platform")

func dupFD(uintptr) (int, error)            { return -1, errNoFD }
func keyOf(*os.File) fileKey                { return fileKey{} }
func fileResident(f *os.File) uint64        { return 0 }
func openNoFollow(string) (*os.File, error) { return nil, errNoFD }
