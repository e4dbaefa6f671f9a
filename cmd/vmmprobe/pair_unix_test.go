//go:build unix

package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestPairSecretFIFO: a FIFO named as the secret file is refused at once, not waited on.
func TestPairSecretFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	t0 := time.Now()
	r := runWith(t, backend.Opener{}, "pair", "--backend=sim", "--connect", "127.0.0.1:1", "--secret-file", fifo, "--timeout", "1s")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "not a regular file")
	assert.Less(t, time.Since(t0), 2*time.Second)
	r = runWith(t, backend.Opener{}, "pair", "--backend=sim", "--connect", "127.0.0.1:1", "--secret-file", secretFile(t, "replace-me-with-64-hex-characters"))
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "placeholder")
}
