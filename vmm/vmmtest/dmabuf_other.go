//go:build !linux

package vmmtest

import (
	"errors"
	"testing"
)

// The dmabuf group needs Linux (needLinux skips it first); these are never reached.

func closeDescriptor(int) {}

func descriptorSize(int) (int64, error) { return 0, errors.New("dma-buf descriptors are Linux only") }

func dmaBufDescriptors(*testing.T) []string { return nil }
