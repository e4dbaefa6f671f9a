//go:build windows

package vmm_test

import "golang.org/x/sys/windows"

// closeFD closes what ExportFD returned (a handle on Windows).
func closeFD(fd int) { windows.CloseHandle(windows.Handle(fd)) }
