// Package fds holds what the transports of package ipc share: the errors they report and
// the checks a descriptor from another process passes before anything uses it.
package fds

import "errors"

var (
	// ErrProtocol is ipc.ErrProtocol.
	ErrProtocol = errors.New("protocol error")
	// ErrUnsupported is ipc.ErrUnsupported.
	ErrUnsupported = errors.New("descriptor passing is not supported on this platform")
)
