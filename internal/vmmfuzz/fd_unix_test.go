//go:build unix

package vmmfuzz_test

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// closeFD closes a descriptor ExportFD returned.
func closeFD(fd int) error { return unix.Close(fd) }

// null is the null device, open for the life of the process.
var null = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		panic(err)
	}
	return f
})

// otherFD is an open descriptor that is no allocation (the null device).
func otherFD() int { return int(null().Fd()) }
