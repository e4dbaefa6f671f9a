//go:build unix

package vmm_test

import "golang.org/x/sys/unix"

func closeFD(fd int) { unix.Close(fd) }
