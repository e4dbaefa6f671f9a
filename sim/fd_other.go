//go:build !unix && !windows

package sim

import (
	"errors"
	"os"
)

var errNoFD = errors.New("file descriptors are not supported on this platform")

func dupFD(*os.File) (int, error)           { return -1, errNoFD }
func fileFromFD(int) (*os.File, error)      { return nil, errNoFD }
func keyOf(*os.File) fileKey                { return fileKey{} }
func fileResident(f *os.File) uint64        { return 0 }
func dupFile(*os.File) (*os.File, error)    { return nil, errNoFD }
func openNoFollow(string) (*os.File, error) { return nil, errNoFD }
