//go:build unix

package main

import (
	"syscall"
	"testing"
)

// TestWatchSignals: SIGTERM, as Kubernetes sends to stop a pod, closes the stop channel
// instead of killing the process.
func TestWatchSignals(t *testing.T) {
	stop, release := watchSignals()
	defer release()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-stop
}
