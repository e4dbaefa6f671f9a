// Package fds holds what the transports of package ipc share: the errors they report and
// the checks a descriptor from another process passes before anything uses it.
package fds

import (
	"errors"
	"fmt"
)

var (
	// ErrProtocol is ipc.ErrProtocol.
	ErrProtocol = errors.New("protocol error")
	// ErrUnsupported is ipc.ErrUnsupported.
	ErrUnsupported = errors.New("descriptor passing is not supported on this platform")
)

// Close closes descriptors, and says which failed.
func Close(fds []int) error {
	var errs []error
	for _, fd := range fds {
		if err := closeFD(fd); err != nil {
			errs = append(errs, fmt.Errorf("close fd %d: %w", fd, err))
		}
	}
	return errors.Join(errs...)
}
