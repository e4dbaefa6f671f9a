package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shellLine is a line of env's output: a comment, or an export of vmmprobe's own words.
var shellLine = regexp.MustCompile(`^(# .*|export [A-Z][A-Z0-9_]*=[a-z0-9_]+)$`)

// exports are the variables env's output sets.
func exports(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		require.Regexp(t, shellLine, l)
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
	}
	return got
}

func TestEnv(t *testing.T) {
	t.Parallel()
	if !ipcSupported {
		t.Skip("the settings rest on the cross-process checks, which need Linux")
	}
	for preset, want := range map[string]map[string]string{
		"hgx8":         {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", "NCCL_MNNVL_ENABLE": "0", handleTypeVar: "posix_fd"},
		"mnnvl":        {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1", handleTypeVar: "fabric"},
		"h100":         {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "0", "NCCL_MNNVL_ENABLE": "0", handleTypeVar: "posix_fd"},
		"oldgpu":       {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "NCCL_MNNVL_ENABLE": "0", handleTypeVar: "none"},
		"hgx8-fm-down": {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "NCCL_MNNVL_ENABLE": "0", handleTypeVar: "none"},
	} {
		r := runWith(t, noDriver, "env", "--backend=sim", "--preset", preset)
		assert.Equal(t, want, exports(t, r.stdout), preset)
		assert.Contains(t, r.stdout, "# SIMULATED: ", preset)
		if preset == "mnnvl" {
			assert.Contains(t, r.stdout, "# NCCL_MNNVL_ENABLE left unset\n", "fabric handles work: NCCL decides")
		}
	}

	// A failed check that a rule rests on changes the setting, and env exits 5.
	r := runWith(t, failing(sim.OpExportFD, 1, cu.ERROR_UNKNOWN), "env", "--backend=sim", "--preset=h100")
	assert.Equal(t, exitCheckFailed, r.code)
	assert.Equal(t, "0", exports(t, r.stdout)["NCCL_CUMEM_ENABLE"])
	assert.Contains(t, r.stdout, "memory cannot be shared between processes as POSIX file descriptors: device 0: posix-fd-export failed: export failed")

	// JSON carries the settings with their rules.
	r = runWith(t, noDriver, "env", "--backend=sim", "--preset=hgx8", "-o", "json")
	var doc document
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Len(t, doc.Settings, 4)
	for _, s := range doc.Settings {
		assert.NotEmpty(t, s.Rule)
		assert.NotEmpty(t, s.Reason)
	}
}

func TestReady(t *testing.T) {
	t.Parallel()
	if !ipcSupported {
		t.Skip("the requirements rest on the cross-process checks, which need Linux")
	}
	for _, tc := range []struct {
		preset  string
		require string
		code    int
	}{
		{"h100", "", exitOK},
		{"h200-no-nvml", "", exitOK},
		{"oldgpu", "", exitNotReady},
		{"hgx8", "vmm,posix-fd,peer,nvls,node", exitOK},
		{"hgx8", "fabric", exitNotReady},
		{"mnnvl", "vmm,fabric,nvls,peer,node", exitOK},
		{"mnnvl-no-channel", "", exitNotReady},
		{"hgx8-degraded", "", exitOK},
		{"hgx8-fm-down", "", exitNoDriver},
	} {
		args := []string{"ready", "--backend=sim", "--preset", tc.preset}
		if tc.require != "" {
			args = append(args, "--require", tc.require)
		}
		r := runWith(t, noDriver, args...)
		assert.Equal(t, tc.code, r.code, "%v: %s%s", args, r.stdout, r.stderr)
		if tc.code == exitOK {
			assert.True(t, strings.Contains(r.stdout, "\nREADY (") || strings.HasPrefix(r.stdout, "READY ("), r.stdout)
		}
		r = runWith(t, noDriver, append(args, "-o", "json")...)
		var doc document
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stderr)
		require.NotNil(t, doc.Readiness)
		assert.Equal(t, tc.code == exitOK, doc.Readiness.Ready)
	}
	// A failed check fails the requirement it belongs to: not ready, not "check failed".
	r := runWith(t, failing(sim.OpMap, 1, cu.ERROR_UNKNOWN), "ready", "--backend=sim", "--preset=h100")
	assert.Equal(t, exitNotReady, r.code)
	assert.Contains(t, r.stdout, "  vmm   NOT MET  device 0: map failed\n")
}

// TestInitFailure: a driver that loads and refuses (cuInit: CUDA_ERROR_SYSTEM_NOT_READY,
// Fabric Manager down) still gets its report, in every format, with the fabric picture
// that says why; the exit code is 3.
func TestInitFailure(t *testing.T) {
	t.Parallel()
	for _, f := range []string{formatTable, formatJSON, formatLabels, formatPrometheus} {
		r := runWith(t, noDriver, "check", "--backend=sim", "--preset=hgx8-fm-down", "-o", f)
		assert.Equal(t, exitNoDriver, r.code, f)
		assert.NotEmpty(t, r.stdout, f)
		assert.Contains(t, r.stderr, "the CUDA driver did not initialize: sim: cuInit(0): CUDA_ERROR_SYSTEM_NOT_READY", f)
	}
	r := runWith(t, noDriver, "--backend=sim", "--preset=hgx8-fm-down", "-o", "json")
	var doc document
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Contains(t, doc.Backend.InitError, "CUDA_ERROR_SYSTEM_NOT_READY")
	assert.Empty(t, doc.Devices)
	assert.Equal(t, 13000, doc.Backend.DriverVersion, "the driver's version needs no cuInit")
	assert.Equal(t, stateProblem, doc.Node.FabricManager.State)
	assert.Contains(t, doc.Node.FabricManager.Diagnosis, "cuInit fails with CUDA_ERROR_SYSTEM_NOT_READY")

	// The real driver refusing: reported the same way, from the host's view of the node.
	notReady := backend.Opener{CUDA: func() (vmm.Backend, error) {
		return nil, &cu.Error{Op: "cuInit", Err: cu.ERROR_SYSTEM_NOT_READY}
	}}
	for _, args := range [][]string{{"--backend=cuda", "-o", "json"}, {"-o", "json"}, {}} {
		r = runWith(t, notReady, args...)
		assert.Equal(t, exitNoDriver, r.code, "%v", args)
		doc = document{}
		if len(args) > 0 {
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), "%v: %s", args, r.stderr)
			assert.Equal(t, "cuda", doc.Backend.Name)
			assert.False(t, doc.Backend.Simulated, "a driver that loads is never replaced by sim")
			assert.NotNil(t, doc.Node)
		} else {
			assert.NotContains(t, r.stdout, "SIMULATED", "the table does not fall back either")
			assert.Contains(t, r.stdout, "cuInit                     FAILED")
		}
	}
}

// daemonDeps are deps whose ticks and stop signal the test gives, and whose clock moves a
// minute at each reading, so each write differs.
func daemonDeps(o backend.Opener) (deps, chan time.Time, chan struct{}) {
	d := testDeps(o)
	tick, stop := make(chan time.Time), make(chan struct{})
	var minutes atomic.Int64
	d.now = func() time.Time { return testNow.Add(time.Duration(minutes.Add(1)) * time.Minute) }
	d.ticker = func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} }
	d.signals = func() (<-chan struct{}, func()) { return stop, func() {} }
	return d, tick, stop
}

// TestDaemon: the file is written at once and at every tick, and removed when the stop
// signal comes. A tick is received only once the write before it is done, so each send
// below returns after a complete write: no sleeping, no polling.
func TestDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cuvmm.features")
	d, tick, stop := daemonDeps(noDriver)
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"check", "--backend=sim", "--preset=h100", "-o", "labels", "--output-file", path, "--interval=2m"}, &out, &errb, d)
		done <- outcome{code, out.String(), errb.String()}
	}()
	tick <- time.Time{}
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(first), "# +expiry-time="+testNow.Add(2*time.Minute+6*time.Minute).Format(time.RFC3339)+"\n"),
		"labels expire after three intervals: %s", first)
	tick <- time.Time{}
	second, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotEqual(t, string(first), string(second), "refreshed")
	assert.Contains(t, string(second), "cuvmm.io/check.passed=true")
	close(stop)
	r := <-done
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "the file goes with the daemon")
	// One line at start, one per refresh, one at exit.
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	require.Len(t, lines, 5, r.stderr)
	assert.Equal(t, "vmmprobe: daemon start output="+path+" format=labels interval=2m0s backend=sim", lines[0])
	assert.Regexp(t, `^vmmprobe: daemon refresh n=1 took=\S+ exit=0 changed=all \(first\)$`, lines[1])
	assert.Regexp(t, `^vmmprobe: daemon refresh n=2 took=\S+ exit=0 changed=0$`, lines[2], "only the time changed")
	assert.Regexp(t, `^vmmprobe: daemon refresh n=3 took=\S+ exit=0 changed=0$`, lines[3])
	assert.Equal(t, "vmmprobe: daemon exit code=0 reason=signal removed="+path, lines[4])
}

// TestDaemonStopsWhileARefreshHangs: a stop is obeyed while a refresh hangs (a driver or
// NVML call that does not return; a pipe whose reader stopped reading is the same), with a
// warning, and the refresh, when it comes back, writes nothing over the removal.
func TestDaemonStopsWhileARefreshHangs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cuvmm.json")
	d, tick, stop := daemonDeps(noDriver)
	var hung atomic.Bool
	entered, gate := make(chan struct{}), make(chan struct{})
	now := d.now
	d.now = func() time.Time {
		if _, err := os.Stat(path); err == nil && hung.CompareAndSwap(false, true) { // the second refresh
			close(entered)
			<-gate
		}
		return now()
	}
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"report", "--backend=sim", "--preset=h100", "-o", "json", "--output-file", path, "--interval=1m"}, &out, &errb, d)
		done <- outcome{code, out.String(), errb.String()}
	}()
	tick <- time.Time{}
	<-entered
	close(stop)
	r := <-done
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "refresh n=2 still under way after")
	_, err := os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "removed at stop")
	close(gate)
	time.Sleep(500 * time.Millisecond) // a write would come at once
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "the refresh left behind wrote the output again")
}

// hookWriter is a standard error that calls onWrite with each line the daemon writes.
type hookWriter struct {
	mu      sync.Mutex
	b       bytes.Buffer
	onWrite func(string)
}

func (w *hookWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.b.Write(p)
	w.mu.Unlock()
	w.onWrite(string(p))
	return len(p), nil
}

// TestDaemonStopEndsWrites: a refresh let go just as the stop gives up waiting for it
// writes while the stop ends the writes; the output is removed after that write, never
// before it, whichever comes first.
func TestDaemonStopEndsWrites(t *testing.T) {
	for _, delay := range []time.Duration{100 * time.Microsecond, 400 * time.Microsecond, 1500 * time.Microsecond, 3 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "cuvmm.features")
			d, tick, stop := daemonDeps(noDriver)
			// The second refresh hangs at its last reading of the clock, just before its write.
			var calls, hangAt atomic.Int32
			entered, gate := make(chan struct{}), make(chan struct{})
			now := d.now
			d.now = func() time.Time {
				if calls.Add(1) == hangAt.Load() {
					close(entered)
					<-gate
				}
				return now()
			}
			var once sync.Once
			w := &hookWriter{onWrite: func(s string) {
				if strings.Contains(s, "still under way") {
					once.Do(func() {
						close(gate)
						for t0 := time.Now(); time.Since(t0) < delay; {
						}
					})
				}
			}}
			done := make(chan int, 1)
			go func() {
				done <- run([]string{"check", "--backend=sim", "--preset=h100", "-o", "labels", "--output-file", path, "--interval=1m"}, io.Discard, w, d)
			}()
			for _, err := os.Stat(path); err != nil; _, err = os.Stat(path) {
				time.Sleep(time.Millisecond) // the first refresh writes after its last reading
			}
			hangAt.Store(2 * calls.Load())
			tick <- time.Time{}
			<-entered
			close(stop)
			require.Equal(t, exitOK, <-done, w.b.String())
			time.Sleep(300 * time.Millisecond) // a write would come at once
			_, err := os.Stat(path)
			require.ErrorIs(t, err, os.ErrNotExist, "the output outlived the daemon")
		})
	}
}

func TestDaemonQuiet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cuvmm.features")
	d, tick, stop := daemonDeps(noDriver)
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"--backend=sim", "-o", "labels", "--output-file", path, "--interval=2m", "--quiet"}, &out, &errb, d)
		done <- outcome{code, out.String(), errb.String()}
	}()
	tick <- time.Time{}
	close(stop)
	r := <-done
	assert.Equal(t, exitOK, r.code)
	assert.Empty(t, r.stderr)
}

func TestChanges(t *testing.T) {
	a := []byte("# +expiry-time=1\ncuvmm.io/a=1\ncuvmm.io/b=true\n")
	b := []byte("# +expiry-time=2\ncuvmm.io/a=2\ncuvmm.io/b=true\ncuvmm.io/c=x\n")
	assert.Equal(t, "changed=all (first)", changes(nil, a))
	assert.Equal(t, "changed=0", changes(a, a))
	assert.Equal(t, "changed=3 keys=cuvmm.io/a,cuvmm.io/c", changes(a, b))
	p1 := []byte("# HELP x\ncuvmm_x{gpu=\"0\"} 1\n")
	p2 := []byte("# HELP x\ncuvmm_x{gpu=\"0\"} 0\n")
	assert.Equal(t, "changed=2 keys=cuvmm_x", changes(p1, p2))
	t1 := []byte("# HELP x\ncuvmm_probe_timestamp_seconds 1.7e+09\ncuvmm_x{gpu=\"0\"} 1\n")
	t2 := []byte("# HELP x\ncuvmm_probe_timestamp_seconds 1.8e+09\ncuvmm_x{gpu=\"0\"} 1\n")
	assert.Equal(t, "changed=0", changes(t1, t2), "the timestamp gauge changes every time")
}

// TestDaemonWhenTheDriverRefuses: cuInit's failure is sticky, so the daemon writes what it
// knows once and exits 3 for its supervisor to restart it; the file stays, to expire.
func TestDaemonWhenTheDriverRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cuvmm.prom")
	d, _, _ := daemonDeps(noDriver)
	var out, errb bytes.Buffer
	code := run([]string{"--backend=sim", "--preset=hgx8-fm-down", "-o", "prometheus", "--output-file", path, "--interval=1m"}, &out, &errb, d)
	assert.Equal(t, exitNoDriver, code, errb.String())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(got), "cuvmm_cuda_ready 0\n")
}

// TestDaemonKeepsGoingWhenAWriteFails: the directory may appear later (a volume mounted
// late); each failure is reported and the daemon goes on.
func TestDaemonKeepsGoingWhenAWriteFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "cuvmm.features")
	d, tick, stop := daemonDeps(noDriver)
	done := make(chan outcome, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"--backend=sim", "-o", "labels", "--output-file", path, "--interval=1m"}, &out, &errb, d)
		done <- outcome{code, out.String(), errb.String()}
	}()
	tick <- time.Time{} // the first write failed; the second may be under way
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	tick <- time.Time{} // the third starts after the directory was made
	tick <- time.Time{} // ... and is done
	_, err := os.Stat(path)
	require.NoError(t, err, "written once the directory is there")
	close(stop)
	r := <-done
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stderr, "output file "+path+": ")
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestEnvReasonsStayComments: a reason that quotes the node cannot start a shell line.
func TestEnvReasonsStayComments(t *testing.T) {
	doc := &document{Vmmprobe: programInfo{Version: "test"}, GeneratedAt: "now",
		Settings: []setting{{Name: "NCCL_CUMEM_ENABLE", Value: "0", Rule: "cumem", Reason: "channel\nrm -rf /\n# x"}}}
	got := exports(t, string(renderShell(doc)))
	assert.Equal(t, map[string]string{"NCCL_CUMEM_ENABLE": "0"}, got)
}
