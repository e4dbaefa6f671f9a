//go:build !unix && !windows

package sim_test

func closeFD(int) {}
