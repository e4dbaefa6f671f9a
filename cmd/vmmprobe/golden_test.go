package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

// goldenPresets are the sim presets the golden files cover: one GPU with fabric handles
// but no IMEX channel, an 8-GPU NVSwitch node, a multi-node NVLink tray with IMEX, a GPU
// without VMM on an old driver, and a workstation card.
var goldenPresets = []string{"h100", "hgx8", "mnnvl", "oldgpu", "workstation"}

// TestGolden renders every format of the report and of check on several sim presets and
// compares them with testdata/<command>-<preset>.<format>.golden (go test -update rewrites
// them).
func TestGolden(t *testing.T) {
	for _, cmd := range []string{cmdReport, cmdCheck} {
		for _, preset := range goldenPresets {
			for _, format := range []string{formatTable, formatJSON, formatLabels} {
				name := cmd + "-" + preset + "." + format
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					if cmd == cmdCheck && runtime.GOOS != "linux" {
						t.Skip("the check golden files are recorded on Linux (the cross-process check needs it)")
					}
					r := runWith(t, noDriver, cmd, "--backend=sim", "--preset", preset, "-o", format)
					require.Equal(t, exitOK, r.code, r.stderr)
					assert.Empty(t, r.stderr)
					path := filepath.Join("testdata", name+".golden")
					if *update {
						require.NoError(t, os.WriteFile(path, []byte(r.stdout), 0o644))
						return
					}
					want, err := os.ReadFile(path)
					require.NoError(t, err, "run go test -update to create it")
					assert.Equal(t, string(want), r.stdout, "run go test -update if the change is intended")
				})
			}
		}
	}
}

// TestJSONSchema checks the promises docs/vmmprobe.md makes about the JSON document.
func TestJSONSchema(t *testing.T) {
	t.Parallel()
	for _, preset := range goldenPresets {
		r := runWith(t, noDriver, "check", "--backend=sim", "--preset", preset, "-o", "json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
		assert.Equal(t, float64(schemaVersion), doc["schema_version"])
		assert.Equal(t, "check", doc["command"])
		be := doc["backend"].(map[string]any)
		assert.Equal(t, "sim", be["name"])
		assert.Equal(t, true, be["simulated"])
		assert.Equal(t, preset, be["preset"])
		for _, list := range []string{"devices", "peers", "checks"} {
			items, _ := doc[list].([]any)
			for _, it := range items {
				assert.Equal(t, "sim", it.(map[string]any)["backend"], "every %s record names the backend", list)
			}
		}
		for _, it := range doc["checks"].([]any) {
			c := it.(map[string]any)
			assert.Contains(t, []any{statusOK, statusUnsupported, statusFailed, statusSkipped}, c["status"])
			if c["status"] == statusUnsupported || c["status"] == statusFailed {
				assert.NotEmpty(t, c["remedy"], "%v", c)
			}
		}
		// Decoding into the Go types loses nothing.
		var typed document
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &typed))
		again, err := renderJSON(&typed)
		require.NoError(t, err)
		assert.JSONEq(t, r.stdout, string(again))
	}
}

// labelLine is an NFD feature-file line under our prefix whose key and value are valid
// Kubernetes label parts.
var labelLine = regexp.MustCompile(`^cuvmm\.io/[a-z0-9]([-a-z0-9.]*[a-z0-9])?=(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

func TestLabels(t *testing.T) {
	t.Parallel()
	for _, preset := range goldenPresets {
		for _, cmd := range []string{cmdReport, cmdCheck} {
			r := runWith(t, noDriver, cmd, "--backend=sim", "--preset", preset, "-o", "labels")
			require.Equal(t, exitOK, r.code, r.stderr)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			keys := make([]string, len(lines))
			for i, l := range lines {
				keys[i], _, _ = strings.Cut(l, "=")
			}
			assert.IsIncreasing(t, keys, "sorted by key")
			for _, l := range lines {
				assert.Regexp(t, labelLine, l)
				k, v, _ := strings.Cut(l, "=")
				assert.LessOrEqual(t, len(k)-len(labelPrefix), 63, l)
				assert.LessOrEqual(t, len(v), 63, l)
			}
			assert.Contains(t, lines, "cuvmm.io/simulated=true")
			assert.Contains(t, lines, "cuvmm.io/backend=sim")
			if cmd == cmdCheck {
				assert.NotContains(t, r.stdout, "cuvmm.io/check.multicast=", "not exercised: no label")
			}
		}
	}
}
