package main

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// --output-file NUL discards the output, also when standard output is a pipe: Windows
// gives every pipe and device file ID 0, so os.SameFile would take NUL for it.
func TestOutputFileNulIsNotStandardOutput(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stdout
	os.Stdout = w
	werr := writeOutput("NUL", []byte("the document\n"))
	os.Stdout = saved
	w.Close()
	require.NoError(t, werr)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Empty(t, b, "written to standard output")
}
