//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

// TestDaemonStopsWhileAWriteHangs: --output-file is a named pipe whose reader stopped
// reading. Once the pipe is full a write never returns, and the stop signal still ends the
// daemon, with a warning for the refresh it left.
func TestDaemonStopsWhileAWriteHangs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cuvmm.json")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	rd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // never read
	require.NoError(t, err)
	defer rd.Close()
	d, tick, stop := daemonDeps(noDriver)
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"check", "--backend=sim", "--preset=hgx8", "-o", "json", "--output-file", path, "--interval=1m"}, &out, &errb, d)
		done <- outcome{code, out.String(), errb.String()}
	}()
	stuck := false // a tick not taken: the daemon is in a write
	for i := 0; i < 100 && !stuck; i++ {
		select {
		case tick <- time.Time{}:
		case <-time.After(time.Second):
			stuck = true
		}
	}
	require.True(t, stuck, "100 outputs fit in the pipe")
	close(stop)
	select {
	case r := <-done:
		assert.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stderr, "still under way after")
	case <-time.After(stopGrace + 10*time.Second):
		t.Fatal("the daemon did not stop while its write hung")
	}
}
