//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestRemoveOutputLeavesDevicesAndLinks(t *testing.T) {
	assert.NoError(t, removeOutput("/dev/null"))
	_, err := os.Stat("/dev/null")
	assert.NoError(t, err)
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	require.NoError(t, os.WriteFile(target, []byte("x"), 0o644))
	require.NoError(t, os.Symlink("target", link))
	require.NoError(t, removeOutput(link))
	_, err = os.Lstat(link)
	assert.NoError(t, err, "the link stays")
	_, err = os.Stat(target)
	assert.ErrorIs(t, err, os.ErrNotExist, "what it names goes")
	assert.NoError(t, removeOutput(filepath.Join(dir, "never-written")))
}
