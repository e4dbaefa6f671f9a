//go:build !linux

package fds

import (
	"errors"
	"fmt"
	"os"
)

// Close closes descriptors (or, on Windows, handles) through package os, which knows each
// platform's close.
func Close(fds []int) error {
	var errs []error
	for _, fd := range fds {
		if err := os.NewFile(uintptr(fd), "").Close(); err != nil {
			errs = append(errs, fmt.Errorf("close fd %d: %w", fd, err))
		}
	}
	return errors.Join(errs...)
}
