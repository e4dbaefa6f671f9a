//go:build !unix

package main

import (
	"errors"
	"io/fs"
)

// deviceMajor is 0 here: device numbers are a Unix notion.
func deviceMajor(path string, fi fs.FileInfo) uint32 { return 0 }

// oNonblock: there is no non-blocking open here.
const oNonblock = 0

// describeDescriptor: dma-bufs are Linux only (the check does not run elsewhere).
func describeDescriptor(int) (int64, string, error) {
	return 0, "", errors.New("dma-buf descriptors are Linux only")
}
