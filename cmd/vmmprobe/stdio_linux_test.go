package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vmmprobe runs this test binary as vmmprobe with args, its standard output stdout.
func vmmprobe(t *testing.T, stdout *os.File, args ...string) (code int, stderr string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := reexec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		require.True(t, ee.Exited(), "%v: %s", ee, errb.String())
		return ee.ExitCode(), errb.String()
	}
	require.NoError(t, err)
	return 0, errb.String()
}

// TestClosedStandardOutput: a reader gone before vmmprobe writes (vmmprobe ... | head) is
// exit 1 with a message, not death by SIGPIPE.
func TestClosedStandardOutput(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	r.Close()
	defer w.Close()
	code, stderr := vmmprobe(t, w, "check", "--backend=sim", "-o", "json")
	assert.Equal(t, exitFailure, code, stderr)
	assert.Contains(t, stderr, "standard output: write")
}

// TestOutputFileStandardOutput: --output-file /dev/stdout writes through the descriptor:
// into a pipe, and onto the end of a log that standard output appends to, which stays the
// file its writer holds.
func TestOutputFileStandardOutput(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	code, stderr := vmmprobe(t, w, "--backend=sim", "-o", "labels", "--output-file", "/dev/stdout")
	w.Close()
	assert.Equal(t, exitOK, code, stderr)
	got := new(bytes.Buffer)
	_, err = got.ReadFrom(r)
	require.NoError(t, err)
	assert.Contains(t, got.String(), "cuvmm.io/")

	log := t.TempDir() + "/log"
	require.NoError(t, os.WriteFile(log, []byte("earlier line\n"), 0o644))
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	code, stderr = vmmprobe(t, f, "--backend=sim", "-o", "labels", "--output-file", "/dev/stdout")
	assert.Equal(t, exitOK, code, stderr)
	_, err = f.WriteString("later line\n")
	require.NoError(t, err)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("earlier line\n# +expiry-time=")) && bytes.Contains(b, []byte("\ncuvmm.io/")) && bytes.HasSuffix(b, []byte("later line\n")), "%s", b)
}
