package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrometheusParserStaysOutOfTheBinary: github.com/prometheus/common (and what it pulls
// in: protobuf, client_model) is a test-only dependency, for checking -o prometheus with
// the real parser; the binary writes the format itself and depends only on this module,
// purego and golang.org/x/sys. go list -deps names every package the binary is built from.
func TestPrometheusParserStaysOutOfTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command here (%v)", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".") {
			continue // the standard library
		}
		ok := strings.HasPrefix(pkg, "github.com/cuvmm/cuvmm/") || strings.HasPrefix(pkg, "github.com/ebitengine/purego") ||
			strings.HasPrefix(pkg, "golang.org/x/sys/")
		assert.True(t, ok, "the vmmprobe binary is built from %s", pkg)
	}
}
