package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/internal/buildinfo"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/nvml"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envTestMain makes the test binary run vmmprobe's main, for the tests that need a real
// process (exit status, a driver path from the environment).
const envTestMain = "CUVMM_VMMPROBE_TEST_MAIN"

func TestMain(m *testing.M) {
	// The cross-process check re-executes this binary (os.Executable) as its child.
	if code, ok := runChildIfRequested(backend.Opener{}); ok {
		os.Exit(code)
	}
	if os.Getenv(envTestMain) != "" {
		main()
	}
	// Under the race detector every process sleeps a second before exiting (to catch late
	// reports); the child processes these tests start need not.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// noDriver acts out a machine without a CUDA driver, whatever this one has.
var noDriver = backend.Opener{
	CUDA: func() (vmm.Backend, error) {
		return nil, &loader.LoadError{Tried: []string{"libcuda.so.1"}, Reasons: []string{"libcuda.so.1: cannot open shared object file"}}
	},
}

// noDevice acts out a driver that loads but finds no device (cuInit's CUDA_ERROR_NO_DEVICE).
var noDevice = backend.Opener{
	CUDA: func() (vmm.Backend, error) { return nil, &cu.Error{Op: "cuInit", Err: cu.ERROR_NO_DEVICE} },
}

// zeroDevices is a backend whose device count is 0.
type zeroDevices struct{ vmm.Backend }

func (zeroDevices) DeviceCount() (int, error) { return 0, nil }

// testHost is the node the tests run on as vmmprobe would see it with the real driver: a
// Linux machine where nothing of the NVLink fabric is present. The tests never read the
// machine they run on.
func testHost() system {
	h := newMemSystem(false)
	h.nvml = nvml.Node{Unavailable: "NVML unavailable: test host"}
	return h
}

// testDeps are run's dependencies for tests: o opens the backends, the clock stands
// still, and the daemon's signal and ticks come from the test.
func testDeps(o backend.Opener) deps {
	return deps{
		open:         o,
		host:         testHost,
		now:          func() time.Time { return testNow },
		build:        buildinfo.Info{Version: "test", GoVersion: "go1.99", GOOS: "plan9", GOARCH: "mips"},
		signals:      func() (<-chan struct{}, func()) { return make(chan struct{}), func() {} },
		ticker:       func(time.Duration) (<-chan time.Time, func()) { return make(chan time.Time), func() {} },
		root:         testProc,
		checkpointer: checkpoint.For,
		gpus:         backendGPUs,
	}
}

// testProc is the /proc the checkpoint commands read in tests: process 500 a CUDA process
// with GPU 0 open, 600 one that holds a dma-buf.
var testProc = fstest.MapFS{
	"proc/500/stat":   {Data: []byte("500 (server) S 1 500 ...")},
	"proc/500/status": {Data: []byte("Name:\tserver\nRssAnon:\t 2097152 kB\nRssFile:\t 9999999 kB\n")},
	"proc/500/maps":   {Data: []byte("x /usr/lib/x86_64-linux-gnu/libcuda.so.1\n")},
	"proc/500/fd/3":   {Data: []byte("/dev/nvidiactl"), Mode: fs.ModeSymlink},
	"proc/500/fd/4":   {Data: []byte("/dev/nvidia0"), Mode: fs.ModeSymlink},
	"proc/600/stat":   {Data: []byte("600 (trainer) S 1 600 ...")},
	"proc/600/maps":   {Data: []byte("x /usr/lib/x86_64-linux-gnu/libcuda.so.1\n")},
	"proc/600/fd/3":   {Data: []byte("anon_inode:dmabuf"), Mode: fs.ModeSymlink},
	"proc/800/stat":   {Data: []byte("800 (x\nok: no hazard \x1b[2J) S 1 800 ...")},
	"proc/800/maps":   {Data: []byte("x /usr/lib/x86_64-linux-gnu/libcuda.so.1\n")},
	"proc/800/fd/3":   {Data: []byte("/dev/nvidiactl"), Mode: fs.ModeSymlink},
	"proc/driver/nvidia/gpus/0000:18:00.0/information": {Data: []byte("Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632\nDevice Minor: \t 0\n")},
}

type outcome struct {
	code           int
	stdout, stderr string
}

func runWith(t *testing.T, o backend.Opener, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb, testDeps(o))
	return outcome{code, out.String(), errb.String()}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runWith(t, noDriver, args...)
		assert.Equal(t, exitOK, r.code, "%v", args)
		assert.Empty(t, r.stderr, "%v: help goes to stdout", args)
		for _, want := range []string{"Exit codes:", "0  ok", "1  a runtime failure", "2  usage error", "3  no CUDA driver", "4  no CUDA device",
			"5  check, env: a check failed", "6  ready: a requirement is not met", "\n  env ", "\n  ready ", "\n  pair ", "\n  completion ",
			"--unsafe-multicast", "UNSAFE ON SHARED MACHINES", "--output-file", "--backend", "--preset", "hgx8-fm-down",
			"--interval", "--label-ttl", "--require", "--version", "prometheus", "--listen", "--quiet"} {
			assert.Contains(t, r.stdout, want, "%v", args)
		}
		for _, l := range strings.Split(r.stdout, "\n") {
			assert.LessOrEqual(t, len(l), tableWidth, "%v: %q", args, l)
		}
	}
	// One command's help: its paragraph and the flags that apply to it.
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"check", "--help"}, []string{"Usage: vmmprobe check", "--unsafe-multicast", "--interval", "--label-ttl"}, []string{"--require", "--listen", "\n  env "}},
		{[]string{"ready", "-h"}, []string{"Usage: vmmprobe ready", "--require", "--unsafe-multicast"}, []string{"--interval", "--label-ttl", "--listen"}},
		{[]string{"help", "pair"}, []string{"Usage: vmmprobe pair", "--listen", "--connect", "--secret-file", "--timeout"}, []string{"--require", "--interval"}},
	} {
		r := runWith(t, noDriver, tc.args...)
		assert.Equal(t, exitOK, r.code, "%v", tc.args)
		for _, w := range tc.want {
			assert.Contains(t, r.stdout, w, "%v", tc.args)
		}
		for _, w := range tc.not {
			assert.NotContains(t, r.stdout, w, "%v", tc.args)
		}
	}
}

// TestCLIHabits: what kubectl and gh users type works, and a typo gets a suggestion.
func TestCLIHabits(t *testing.T) {
	a := runWith(t, noDriver, "--backend=sim", "-ojson")
	require.Equal(t, exitOK, a.code, a.stderr)
	assert.True(t, strings.HasPrefix(a.stdout, "{"), "-ojson is -o json")
	for _, tc := range []struct{ args []string }{{[]string{"--bakend=sim"}}, {[]string{"chek"}}, {[]string{"--backend=sim", "--intreval=5m"}}} {
		r := runWith(t, noDriver, tc.args...)
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.stderr, "did you mean", "%v", tc.args)
	}
	r := runWith(t, noDriver, "--bakend=sim")
	assert.Contains(t, r.stderr, "unknown flag --bakend (did you mean --backend?)")
	r = runWith(t, noDriver, "chek")
	assert.Contains(t, r.stderr, `unknown command "chek" (did you mean check?)`)
	r = runWith(t, noDriver, "frobnicate")
	assert.NotContains(t, r.stderr, "did you mean")
	r = runWith(t, noDriver, "--backend=cuda")
	assert.Equal(t, exitNoDriver, r.code)
	assert.Contains(t, r.stderr, "--backend=sim", "a first run without a GPU says how to simulate one")
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := runWith(t, noDriver, "completion", shell)
		require.Equal(t, exitOK, r.code, r.stderr)
		for _, w := range []string{"vmmprobe", "check", "pair", "backend", "hgx8-fm-down", "prometheus"} {
			assert.Contains(t, r.stdout, w, shell)
		}
		if _, err := exec.LookPath(shell); err == nil {
			cmd := exec.Command(shell, "-n")
			if shell == "fish" {
				cmd = exec.Command(shell, "--no-execute")
			}
			cmd.Stdin = strings.NewReader(r.stdout)
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "%s finds the script malformed: %s", shell, out)
		}
	}
	r := runWith(t, noDriver, "completion", "powershell")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "want bash, zsh or fish")
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"check", "--version"}} {
		r := runWith(t, noDriver, args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		assert.Equal(t, "vmmprobe test go1.99 plan9/mips\n", r.stdout, "%v", args)
	}
	var errb bytes.Buffer
	assert.Equal(t, exitFailure, run([]string{"--version"}, errWriter{}, &errb, testDeps(noDriver)))
	assert.Contains(t, errb.String(), "standard output: ")
}

// TestUsageErrors: every usage error has one shape: nothing on stdout, two lines on
// stderr ("vmmprobe: WHAT" and where to read more), exit 2.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag --bogus"},
		{[]string{"-o", "yaml"}, `-o "yaml": report writes table, json, labels, prometheus`},
		{[]string{"env", "-o", "labels"}, `-o "labels": env writes shell, json`},
		{[]string{"ready", "-o", "prometheus"}, `-o "prometheus": ready writes table, json`},
		{[]string{"--backend", "rocm"}, `--backend "rocm": want auto, cuda or sim`},
		{[]string{"--backend=sim", "--preset", "a100"}, `--preset "a100": no such sim preset`},
		{[]string{"--backend=cuda", "--preset", "h100"}, `--preset "h100": applies to --backend=sim`},
		{[]string{"--unsafe-multicast"}, "--unsafe-multicast applies to check, env and ready"},
		{[]string{"report", "--unsafe-multicast"}, "--unsafe-multicast applies to check, env and ready"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"check", "extra"}, `unexpected argument "extra"`},
		{[]string{"--backend=sim", "-o", "json", "check", "-o"}, "flag needs an argument: -o"},
		{[]string{"check", "--require=vmm"}, "--require applies to ready only"},
		{[]string{"ready", "--require=vmm,warp-drive"}, `unknown requirement "warp-drive"`},
		{[]string{"ready", "--require="}, `--require: empty value`},
		{[]string{"--output-file="}, `--output-file: empty value`},
		{[]string{"--backend=sim", "--preset="}, `--preset: empty value`},
		{[]string{"-o="}, `--o: empty value`},
		{[]string{"-o", "labels", "--label-ttl=1ns"}, "--label-ttl 1ns: at least 1m0s"},
		{[]string{"-o", "labels", "--output-file=x", "--interval=10m", "--label-ttl=5m"}, "--label-ttl 5m0s: at least the interval"},
		{[]string{"--quiet"}, "--quiet applies to the daemon"},
		{[]string{"ready", "--quiet", "--interval=1m", "--output-file=x"}, "--interval applies to report and check"},
		{[]string{"completion"}, "completion needs one shell"},
		{[]string{"--interval=5m"}, "--interval needs --output-file"},
		{[]string{"env", "--interval=5m", "--output-file=x"}, "--interval applies to report and check"},
		{[]string{"--interval=-1s", "--output-file=x"}, "must be positive"},
		{[]string{"--interval=1ms", "--output-file=x"}, "at least 1s"},
		{[]string{"--interval=900000h", "--output-file=x"}, "at most 24h0m0s"},
		{[]string{"-o", "labels", "--label-ttl=900000h"}, "at most 8784h0m0s"},
		{[]string{"--interval=often", "--output-file=x"}, `invalid value "often" for flag -interval`},
		{[]string{"-o", "json", "--label-ttl=1h"}, "--label-ttl applies to -o labels"},
		{[]string{"-o", "labels", "--label-ttl=-1h"}, "must not be negative"},
	} {
		r := runWith(t, noDriver, tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		assert.Empty(t, r.stdout, "%v", tc.args)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if assert.Len(t, lines, 2, "%v: %q", tc.args, r.stderr) {
			assert.True(t, strings.HasPrefix(lines[0], "vmmprobe: "), "%v: %q", tc.args, lines[0])
			assert.Contains(t, lines[0], tc.want, "%v", tc.args)
			assert.Equal(t, "Run 'vmmprobe --help' for usage.", lines[1])
		}
	}
}

func TestFlagsAfterCommand(t *testing.T) {
	a := runWith(t, noDriver, "check", "--backend=sim", "--preset", "h100", "-o", "json")
	b := runWith(t, noDriver, "--backend=sim", "--preset=h100", "--output=json", "check")
	require.Equal(t, exitOK, a.code, a.stderr)
	require.Equal(t, exitOK, b.code, b.stderr)
	assert.Equal(t, a.stdout, b.stdout)
	assert.Contains(t, a.stdout, `"command": "check"`)
}

func TestNoDriver(t *testing.T) {
	t.Run("cuda", func(t *testing.T) {
		for _, args := range [][]string{{"--backend=cuda"}, {"--backend=cuda", "check"}, {"--backend=cuda", "-o", "json"}} {
			r := runWith(t, noDriver, args...)
			assert.Equal(t, exitNoDriver, r.code, "%v", args)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "no CUDA driver")
		}
	})
	t.Run("auto-json-and-labels-never-fall-back", func(t *testing.T) {
		for _, f := range []string{"json", "labels"} {
			for _, cmd := range []string{"report", "check"} {
				r := runWith(t, noDriver, cmd, "-o", f)
				assert.Equal(t, exitNoDriver, r.code, f)
				assert.Empty(t, r.stdout, f)
				assert.Contains(t, r.stderr, "cannot open shared object file", "the reason")
				assert.NotContains(t, r.stderr, "showing the simulated", "no fallback")
			}
		}
	})
	t.Run("auto-table-falls-back", func(t *testing.T) {
		r := runWith(t, noDriver)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.True(t, strings.HasPrefix(r.stdout, "SIMULATED"), r.stdout)
		assert.Contains(t, r.stdout, "sim (preset "+defaultPreset+")")
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one-line notice: %q", r.stderr)
		assert.Contains(t, r.stderr, "cannot open shared object file")
		assert.Contains(t, r.stderr, `simulated "`+defaultPreset+`" preset`)
		// The reason is printed once, on stderr, and names each library once.
		assert.NotContains(t, r.stdout, "cannot open shared object file")
		assert.Equal(t, 1, strings.Count(r.stderr, "libcuda.so.1"), r.stderr)
	})
	t.Run("env-and-ready-never-fall-back", func(t *testing.T) {
		for _, args := range [][]string{{"env"}, {"ready"}, {"ready", "-o", "json"}, {"env", "-o", "json"}, {"-o", "prometheus"}} {
			r := runWith(t, noDriver, args...)
			assert.Equal(t, exitNoDriver, r.code, "%v", args)
			assert.Empty(t, r.stdout, "%v: a simulated node must not pass a gate or set a job's environment", args)
		}
	})
	t.Run("auto-table-fallback-preset", func(t *testing.T) {
		r := runWith(t, noDriver, "--preset", "hgx8")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.True(t, strings.HasPrefix(r.stdout, `SIMULATED: sim preset "hgx8"`), r.stdout)
	})
	t.Run("auto-check-table-falls-back", func(t *testing.T) {
		r := runWith(t, noDriver, "check")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.True(t, strings.HasPrefix(r.stdout, "SIMULATED"), r.stdout)
	})
}

func TestNoDevice(t *testing.T) {
	for _, args := range [][]string{{}, {"-o", "json"}, {"--backend=cuda", "-o", "labels"}, {"check"}} {
		r := runWith(t, noDevice, args...)
		assert.Equal(t, exitNoDevice, r.code, "%v: %s", args, r.stderr)
		assert.Empty(t, r.stdout, "%v: no fallback when the driver loads", args)
		assert.Contains(t, r.stderr, "no CUDA device")
	}
	zero := backend.Opener{CUDA: noDriver.CUDA, Sim: func(cfg sim.Config) (vmm.Backend, error) {
		s, err := sim.New(cfg)
		return zeroDevices{s}, err
	}}
	for _, args := range [][]string{{"--backend=sim"}, {"--backend=sim", "check", "-o", "json"}} {
		r := runWith(t, zero, args...)
		assert.Equal(t, exitNoDevice, r.code, "%v: %s", args, r.stderr)
		assert.Empty(t, r.stdout)
	}
}

// failing opens a sim preset with a fault armed, so that a check fails.
func failing(op sim.Op, n int, res cu.Result) backend.Opener {
	return backend.Opener{CUDA: noDriver.CUDA, Sim: func(cfg sim.Config) (vmm.Backend, error) {
		s, err := sim.New(cfg)
		if err == nil {
			err = s.FailNth(op, n, res)
		}
		return s, err
	}}
}

func TestCheckFailedExit5(t *testing.T) {
	r := runWith(t, failing(sim.OpMap, 1, cu.ERROR_UNKNOWN), "--backend=sim", "check", "-o", "json")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	assert.Contains(t, r.stderr, "1 check(s) failed")
	var doc document
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), "the output is still written")
	require.NotNil(t, doc.Summary)
	assert.Equal(t, 1, doc.Summary.Failed)
	byName := map[string]checkResult{}
	for _, c := range doc.Checks {
		if _, seen := byName[c.Check]; !seen {
			byName[c.Check] = c
		}
	}
	assert.Equal(t, statusOK, byName["reserve"].Status)
	assert.Equal(t, statusFailed, byName["map"].Status)
	assert.Equal(t, "CUDA_ERROR_UNKNOWN", byName["map"].Result)
	assert.NotEmpty(t, byName["map"].Remedy)
	assert.Equal(t, statusSkipped, byName["set-access"].Status)
	assert.Equal(t, statusOK, byName["teardown"].Status, "what was made is released")
	laterOK := statusOK
	if !ipcSupported {
		laterOK = statusUnsupported
	}
	assert.Equal(t, laterOK, byName["posix-fd-ipc"].Status, "later checks still run")

	// The report alone exercises nothing, so the fault never fires.
	r = runWith(t, failing(sim.OpMap, 1, cu.ERROR_UNKNOWN), "--backend=sim")
	assert.Equal(t, exitOK, r.code, r.stderr)

	// Labels are still written, with check.passed=false.
	r = runWith(t, failing(sim.OpCopyDtoH, 1, cu.ERROR_ECC_UNCORRECTABLE), "--backend=sim", "check", "-o", "labels")
	require.Equal(t, exitCheckFailed, r.code, r.stderr)
	assert.Contains(t, r.stdout, "cuvmm.io/check.passed=false\n")
	assert.Contains(t, r.stdout, "cuvmm.io/check.copy=false\n")
}

func TestOutputFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cuvmm.features")
	require.NoError(t, os.WriteFile(path, []byte("old\n"), 0o644))
	r := runWith(t, noDriver, "--backend=sim", "--preset=hgx8", "-o", "labels", "--output-file", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stdout, "the output goes to the file only")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want := runWith(t, noDriver, "--backend=sim", "--preset=hgx8", "-o", "labels")
	assert.Equal(t, want.stdout, string(got))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file left behind")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	if filepath.Separator == '/' {
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	}

	missing := filepath.Join(dir, "missing", "x")
	r = runWith(t, noDriver, "--backend=sim", "--output-file", missing)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "output file "+missing+": ")

	r = runWith(t, noDriver, "--backend=sim", "--output-file", dir)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "output file "+dir+": is a directory")

	// auto without a driver never writes labels (nor touches the old file).
	r = runWith(t, noDriver, "-o", "labels", "--output-file", path)
	assert.Equal(t, exitNoDriver, r.code)
	got2, _ := os.ReadFile(path)
	assert.Equal(t, got, got2)
}

// TestProcess runs the binary as a real process: exit statuses through os.Exit, and a
// driver path (CUVMM_LIBCUDA) that cannot load, whatever this machine has.
func TestProcess(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-o", "json"}, exitNoDriver, ""},
		{[]string{"--backend=cuda"}, exitNoDriver, ""},
		{[]string{"--nope"}, exitUsage, ""},
		{[]string{}, exitOK, "SIMULATED"},
		{[]string{"--backend=sim", "--preset=workstation", "check", "-o", "labels"}, exitOK, "cuvmm.io/check.posix-fd-ipc="},
		{[]string{"--version"}, exitOK, "vmmprobe "},
		{[]string{"--help"}, exitOK, "Usage: vmmprobe"},
		{[]string{"ready"}, exitNoDriver, ""},
		{[]string{"--backend=sim", "--preset=hgx8-fm-down", "-o", "json"}, exitNoDriver, `"init_error"`},
	} {
		cmd := reexec.Command(exe, tc.args...)
		cmd.Env = append(os.Environ(), envTestMain+"=1", loader.EnvPath+"="+filepath.Join(t.TempDir(), "libcuda.so.1"))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errb.String())
		if tc.out == "" {
			assert.Empty(t, out.String(), "%v", tc.args)
		} else {
			assert.Contains(t, out.String(), tc.out, "%v", tc.args)
		}
	}
}

// errWriter fails every write, as standard output does when it is a full disk or a closed
// pipe.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

func TestStdoutWriteFailure(t *testing.T) {
	var errb bytes.Buffer
	code := run([]string{"--backend=sim", "-o", "json"}, errWriter{}, &errb, testDeps(noDriver))
	assert.Equal(t, exitFailure, code, errb.String())
	assert.Contains(t, errb.String(), "standard output: no space left on device")
}
