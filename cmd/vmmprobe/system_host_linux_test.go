package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cuvmm/cuvmm/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostSystem reads a directory laid out like a root through the real file system:
// /dev/null stands in for a channel file (a character device everyone can open).
func TestHostSystem(t *testing.T) {
	root := t.TempDir()
	write := func(p, content string) {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	write("proc/devices", "Character devices:\n  1 nvidia-caps-imex-channels\n")
	dir := filepath.Join(root, "dev/nvidia-caps-imex-channels")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if err := os.Symlink("/dev/null", filepath.Join(dir, "channel0")); err != nil {
		t.Skip(err)
	}
	h := &hostSystem{root: root, probe: func() nvml.Node { return nvml.Node{Unavailable: "test"} }}
	s := readIMEX(h)
	require.Len(t, s.Channels, 1)
	assert.True(t, s.Ready, "%+v", s)
	assert.Equal(t, "host", s.Source)

	// A FIFO where a file is expected is refused, not waited on.
	fifo := filepath.Join(root, "proc/driver/nvidia/params")
	require.NoError(t, os.MkdirAll(filepath.Dir(fifo), 0o755))
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, err := h.ReadFile("/proc/driver/nvidia/params")
	assert.ErrorIs(t, err, errNotRegular)
	assert.Nil(t, readIMEX(h).ChannelCount)

	names, err := h.ReadDir("/dev/nvidia-caps-imex-channels")
	require.NoError(t, err)
	assert.Equal(t, []string{"channel0"}, names)
}
