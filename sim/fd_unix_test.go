//go:build unix

package sim_test

import "golang.org/x/sys/unix"

// closeFD closes a descriptor ExportFD returned.
func closeFD(fd int) { unix.Close(fd) }
