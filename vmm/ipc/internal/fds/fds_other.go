//go:build !linux

package fds

import "os"

// closeFD closes a descriptor (or, on Windows, a handle) through package os, which knows
// each platform's close.
func closeFD(fd int) error { return os.NewFile(uintptr(fd), "").Close() }

// CloseForeign is Close: descriptors come from another process through Linux only.
func CloseForeign(fds []int) error { return Close(fds) }
