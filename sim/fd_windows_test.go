//go:build windows

package sim_test

import "golang.org/x/sys/windows"

// closeFD closes the handle ExportFD returned (sim's descriptors are handles on Windows).
func closeFD(fd int) { windows.CloseHandle(windows.Handle(fd)) }
