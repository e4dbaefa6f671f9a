//go:build !unix && !windows

package vmm_test

func closeFD(int) {}
