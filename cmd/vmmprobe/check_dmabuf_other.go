//go:build !linux

package main

import "errors"

// describeDescriptor: dma-bufs are Linux only (the check does not run elsewhere).
func describeDescriptor(int) (int64, string, error) {
	return 0, "", errors.New("dma-buf descriptors are Linux only")
}
