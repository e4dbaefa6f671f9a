package loader

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lib")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.Equal(t, "not a regular file: a directory", notRegular(dir))
	require.Empty(t, notRegular(file))
	require.Empty(t, notRegular(filepath.Join(dir, "missing")), "left to the system loader, which says why")
}
