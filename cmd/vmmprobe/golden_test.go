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
	"time"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

// goldenPresets are the sim presets the golden files cover: one GPU with fabric handles
// but no IMEX channel, an 8-GPU NVSwitch node, a multi-node NVLink tray with IMEX, a GPU
// without VMM on an old driver, a workstation card, and the nodes broken one way each
// (Fabric Manager down, a degraded fabric, a container without its IMEX channel, no NVML).
var goldenPresets = []string{"h100", "hgx8", "mnnvl", "oldgpu", "workstation",
	"hgx8-fm-down", "hgx8-degraded", "mnnvl-no-channel", "h200-no-nvml"}

// goldenCase is one command and format whose output a golden file holds.
type goldenCase struct {
	cmd, format string
	args        []string
}

var goldenCases = []goldenCase{
	{cmdReport, formatTable, nil}, {cmdReport, formatJSON, nil}, {cmdReport, formatLabels, nil}, {cmdReport, formatPrometheus, nil},
	{cmdCheck, formatTable, nil}, {cmdCheck, formatJSON, nil}, {cmdCheck, formatLabels, nil}, {cmdCheck, formatPrometheus, nil},
	{cmdEnv, formatShell, nil},
	{cmdReady, formatTable, []string{"--require=vmm,posix-fd,fabric,peer,nvls,node"}},
}

// wantCode is the exit code a golden case has on a preset: a driver that does not
// initialize is 3, a ready that is not ready 6.
func wantCode(t *testing.T, cmd, preset string, stdout string) int {
	cfg, _ := sim.Preset(preset)
	if _, err := sim.New(cfg); err != nil {
		return exitNoDriver
	}
	if cmd == cmdReady && strings.Contains(stdout, "NOT READY") {
		return exitNotReady
	}
	return exitOK
}

// TestGolden renders every format of every command on the golden presets and compares
// them with testdata/<command>-<preset>.<format>.golden (go test -update rewrites them).
func TestGolden(t *testing.T) {
	for _, gc := range goldenCases {
		for _, preset := range goldenPresets {
			name := gc.cmd + "-" + preset + "." + gc.format
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if gc.cmd != cmdReport && runtime.GOOS != "linux" {
					t.Skip("the golden files of the checks are recorded on Linux (the cross-process checks need it)")
				}
				args := append([]string{gc.cmd, "--backend=sim", "--preset", preset, "-o", gc.format}, gc.args...)
				r := runWith(t, noDriver, args...)
				require.Equal(t, wantCode(t, gc.cmd, preset, r.stdout), r.code, r.stderr)
				if r.code == exitOK || r.code == exitNotReady {
					assert.Empty(t, r.stderr)
				}
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

// TestGoldenFilesAreAllUsed: no golden file outlives the case that wrote it.
func TestGoldenFilesAreAllUsed(t *testing.T) {
	used := map[string]bool{}
	for _, gc := range goldenCases {
		for _, p := range goldenPresets {
			used[gc.cmd+"-"+p+"."+gc.format+".golden"] = true
		}
	}
	for _, pc := range pairGoldenCases {
		used["pair-"+pc.name+"-importer.golden"], used["pair-"+pc.name+"-exporter.golden"] = true, true
	}
	used["pair-unreachable-importer.golden"] = true
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	require.NoError(t, err)
	for _, f := range files {
		assert.True(t, used[filepath.Base(f)], "%s is written by no case", f)
	}
}

// TestNoCommandOnASimulatedNode: a remedy never offers a command to run on a simulated
// node (it would run on a machine with nothing to fix), in any format.
func TestNoCommandOnASimulatedNode(t *testing.T) {
	t.Parallel()
	for _, preset := range goldenPresets {
		for _, gc := range goldenCases {
			r := runWith(t, noDriver, append([]string{gc.cmd, "--backend=sim", "--preset", preset, "-o", gc.format}, gc.args...)...)
			for _, cmd := range []string{"sudo", "mknod", "systemctl", "journalctl", "nvidia-smi"} {
				assert.NotContains(t, r.stdout, cmd, "%s %s %s", gc.cmd, preset, gc.format)
			}
		}
	}
}

// TestJSONSchema checks the promises docs/vmmprobe.md makes about the JSON document.
func TestJSONSchema(t *testing.T) {
	t.Parallel()
	states := []any{stateOK, stateProblem, stateDegraded, stateNotNeeded, stateUnknown}
	for _, preset := range goldenPresets {
		for _, cmd := range []string{cmdReport, cmdCheck, cmdEnv, cmdReady} {
			r := runWith(t, noDriver, cmd, "--backend=sim", "--preset", preset, "-o", "json")
			var doc map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), "%s %s: %s", cmd, preset, r.stderr)
			assert.Equal(t, float64(schemaVersion), doc["schema_version"])
			assert.Equal(t, cmd, doc["command"])
			assert.Equal(t, "test", doc["vmmprobe"].(map[string]any)["version"])
			at, err := time.Parse(time.RFC3339, doc["generated_at"].(string))
			require.NoError(t, err)
			assert.Equal(t, testNow, at)
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
			checks, _ := doc["checks"].([]any)
			for _, it := range checks {
				c := it.(map[string]any)
				assert.Contains(t, []any{statusOK, statusUnsupported, statusFailed, statusSkipped}, c["status"])
				if c["status"] == statusUnsupported || c["status"] == statusFailed {
					assert.NotEmpty(t, c["remedy"], "%v", c)
				}
			}
			node := doc["node"].(map[string]any)
			for _, p := range []string{"nvml", "nvswitch", "fabric_manager", "imex_daemon"} {
				assert.Contains(t, states, node[p].(map[string]any)["state"], "%s %s", preset, p)
			}
			for _, it := range node["problems"].([]any) {
				assert.NotEmpty(t, it.(map[string]any)["remedy"], "%s: every problem has a remedy", preset)
			}
			assert.Contains(t, []any{verdictYes, verdictNo, verdictUnknown}, doc["nvls"].(map[string]any)["verdict"])
			switch cmd {
			case cmdEnv:
				assert.Len(t, doc["settings"], 4)
			case cmdReady:
				assert.NotNil(t, doc["readiness"])
			}
			// Decoding into the Go types loses nothing.
			var typed document
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &typed))
			again, err := renderJSON(&typed)
			require.NoError(t, err)
			assert.JSONEq(t, r.stdout, string(again))
		}
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
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			require.GreaterOrEqual(t, len(lines), 3, r.stdout)
			// First the directive NFD reads, then a comment, then the labels.
			exp, ok := strings.CutPrefix(lines[0], "# +expiry-time=")
			require.True(t, ok, lines[0])
			at, err := time.Parse(time.RFC3339, exp)
			require.NoError(t, err)
			assert.Equal(t, testNow.Add(defaultOnceTTL), at)
			assert.True(t, strings.HasPrefix(lines[1], "# vmmprobe test "+cmd+", "), lines[1])
			lines = lines[2:]
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
				assert.NotEqual(t, "0", v, "no zero-valued label: %s", l)
			}
			assert.Contains(t, lines, "cuvmm.io/simulated=true")
			assert.Contains(t, lines, "cuvmm.io/backend=sim")
			if cmd == cmdCheck {
				assert.NotContains(t, r.stdout, "cuvmm.io/check.multicast=", "not exercised: no label")
				assert.Contains(t, r.stdout, "cuvmm.io/check.passed=")
			}
		}
	}
	// A node that can do nothing does not pass: no VMM, or a driver that did not start.
	for _, preset := range []string{"oldgpu", "hgx8-fm-down"} {
		r := runWith(t, noDriver, "check", "--backend=sim", "--preset", preset, "-o", "labels")
		assert.Contains(t, r.stdout, "cuvmm.io/check.passed=false\n", preset)
		assert.NotContains(t, r.stdout, "granularity", preset)
	}
	r := runWith(t, noDriver, "check", "--backend=sim", "--preset", "hgx8", "-o", "labels")
	assert.Contains(t, r.stdout, "cuvmm.io/check.passed=true\n")

	// --label-ttl=0s: no directive.
	r = runWith(t, noDriver, "--backend=sim", "-o", "labels", "--label-ttl=0s")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "# vmmprobe test report, "), r.stdout)
}
