//go:build !unix && !windows

package vmmfuzz_test

// Without descriptors ExportFD always fails, so the run never owns one.

func closeFD(int) error { return nil }

func otherFD() int { return 3 }
