//go:build windows

package vmmfuzz_test

import (
	"os"
	"sync"

	"golang.org/x/sys/windows"
)

// closeFD closes what ExportFD returned: a handle on Windows.
func closeFD(fd int) error { return windows.CloseHandle(windows.Handle(fd)) }

// null is the null device, open for the life of the process.
var null = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		panic(err)
	}
	return f
})

// otherFD is an open handle that is no allocation (the null device).
func otherFD() int { return int(null().Fd()) }
