package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/nvml"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addrWriter is a stderr that says where the exporter listens.
type addrWriter struct {
	mu   sync.Mutex
	b    bytes.Buffer
	addr chan string
}

var listeningOn = regexp.MustCompile(`pair: listening on (\S+)`)

func (w *addrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if m := listeningOn.FindSubmatch(p); m != nil {
		w.addr <- string(m[1])
	}
	return len(p), nil
}

func (w *addrWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func secretFile(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(p, []byte(s+"\n"), 0o600))
	return p
}

const testSecret = "correct horse battery staple"

// startExporter runs vmmprobe pair --listen on a free port of the loopback and returns
// where it listens and its outcome, when it has one.
func startExporter(t *testing.T, args ...string) (string, <-chan outcome) {
	t.Helper()
	w := &addrWriter{addr: make(chan string, 1)}
	done := make(chan outcome, 1)
	go func() {
		var out bytes.Buffer
		code := run(append([]string{"pair", "--backend=sim", "--listen", "127.0.0.1:0"}, args...), &out, w, testDeps(backend.Opener{}))
		done <- outcome{code, out.String(), w.String()}
	}()
	select {
	case a := <-w.addr:
		return a, done
	case o := <-done:
		t.Fatalf("the exporter ended before it listened: %d %s %s", o.code, o.stdout, o.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("the exporter does not listen")
	}
	return "", nil
}

func pairJSON(t *testing.T, o outcome) pairReport {
	t.Helper()
	var r pairReport
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &r), "%s\n%s", o.stdout, o.stderr)
	return r
}

func TestPairOnSim(t *testing.T) {
	sec := secretFile(t, testSecret)
	// The runtime opens the network poller's descriptor on first use: open it before
	// counting.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	for _, tc := range []struct {
		name             string
		exporter, imp    string // presets
		importerSecret   string
		code             int
		cause            string
		exporterDiagnose string
	}{
		{name: "ok", exporter: "mnnvl", imp: "mnnvl", code: exitOK},
		{name: "exporter-without-channel", exporter: "mnnvl-no-channel", imp: "mnnvl", code: exitCheckFailed, cause: causeNoChannel,
			exporterDiagnose: "the exporter (this process) cannot create fabric memory on device 0: it has no IMEX channel"},
		{name: "importer-without-channel", exporter: "mnnvl", imp: "mnnvl-no-channel", code: exitCheckFailed, cause: causeNoChannel,
			exporterDiagnose: "the importer has no IMEX channel, so the driver refuses fabric imports"},
		{name: "wrong-secret", exporter: "mnnvl", imp: "mnnvl", importerSecret: "not the secret, but long enough", code: exitCheckFailed, cause: causeSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fdsBefore := openFDCount(t)
			addr, done := startExporter(t, "--preset", tc.exporter, "--secret-file", sec, "-o", "json", "--timeout", "2s")
			isec := sec
			if tc.importerSecret != "" {
				isec = secretFile(t, tc.importerSecret)
			}
			imp := runWith(t, backend.Opener{}, "pair", "--backend=sim", "--preset", tc.imp, "--connect", addr, "--secret-file", isec, "-o", "json")
			exp := <-done
			for i, o := range []outcome{imp, exp} {
				require.Equal(t, tc.code, o.code, "%s\n%s", o.stdout, o.stderr)
				r := pairJSON(t, o)
				assert.Equal(t, tc.code == exitOK, r.OK)
				assert.Equal(t, tc.cause, r.Cause, r.Diagnosis)
				if tc.cause == causeSecret {
					assert.Nil(t, r.Remote, "nothing of the peer is known before it proved the secret")
					assert.Empty(t, r.SizeBytes)
				} else if i == 0 || tc.code == exitOK {
					require.NotNil(t, r.SameHost)
					assert.True(t, *r.SameHost)
				}
				if tc.code == exitOK {
					assert.Equal(t, uint64(2<<20), r.SizeBytes)
				}
			}
			if tc.exporterDiagnose != "" {
				assert.Equal(t, tc.exporterDiagnose, pairJSON(t, exp).Diagnosis)
			}
			steps := map[string]bool{}
			for _, s := range pairJSON(t, imp).Steps {
				steps[s.Step] = true
			}
			if tc.code == exitOK {
				for _, s := range []string{"connect", "auth", "export", "import", "map", "check", "write", "confirm"} {
					assert.True(t, steps[s], "the importer reports step %s: %v", s, steps)
				}
			}
			assert.Equal(t, fdsBefore, openFDCount(t), "descriptors left open")
		})
	}
}

// openFDCount counts this process's descriptors (Linux), or -1 elsewhere (under wine,
// /proc is the emulator's).
func openFDCount(t *testing.T) int {
	if runtime.GOOS != "linux" {
		return -1
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestPairHostilePeers: a peer that sends garbage, stalls, or is not there gets a verdict
// that names it within the deadline.
func TestPairHostilePeers(t *testing.T) {
	sec := secretFile(t, testSecret)
	serve := func(t *testing.T, handle func(net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); handle(c) }()
			}
		}()
		return ln.Addr().String()
	}
	importer := func(t *testing.T, addr string) (pairReport, time.Duration) {
		t0 := time.Now()
		o := runWith(t, backend.Opener{}, "pair", "--backend=sim", "--preset", "mnnvl", "--connect", addr, "--secret-file", sec, "--timeout", "1s", "-o", "json")
		require.Equal(t, exitCheckFailed, o.code, "%s\n%s", o.stdout, o.stderr)
		return pairJSON(t, o), time.Since(t0)
	}
	t.Run("garbage", func(t *testing.T) {
		addr := serve(t, func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			_, _ = io.Copy(io.Discard, c)
		})
		r, _ := importer(t, addr)
		assert.Equal(t, causeProtocol, r.Cause, r.Diagnosis)
	})
	t.Run("stall", func(t *testing.T) {
		addr := serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
		r, took := importer(t, addr)
		assert.Equal(t, causeTimeout, r.Cause, r.Diagnosis)
		assert.Less(t, took, 5*time.Second, "the deadline bounds the run")
	})
	t.Run("hello-then-oversized-frame", func(t *testing.T) {
		addr := serve(t, func(c net.Conn) {
			_ = writeFrame(c, kindHello, make([]byte, pairNonceSize))
			_, _ = c.Write([]byte{'V', 'M', 'P', 'R', pairVersion, kindProof, 0xff, 0xff})
			_, _ = io.Copy(io.Discard, c)
		})
		r, _ := importer(t, addr)
		assert.Equal(t, causeProtocol, r.Cause, r.Diagnosis)
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		r, took := importer(t, addr)
		assert.Equal(t, causeUnreachable, r.Cause, r.Diagnosis)
		assert.Contains(t, r.Error, "refused")
		assert.Less(t, took, 5*time.Second)
	})
	t.Run("garbage-to-the-exporter", func(t *testing.T) {
		addr, done := startExporter(t, "--preset", "mnnvl", "--secret-file", sec, "--timeout", "5s", "-o", "json")
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, _ = c.Write(bytes.Repeat([]byte{0xff}, 64))
		o := <-done
		c.Close()
		require.Equal(t, exitCheckFailed, o.code, o.stderr)
		r := pairJSON(t, o)
		assert.Equal(t, causeProtocol, r.Cause)
		assert.Empty(t, r.SizeBytes, "no memory was offered")
	})
	t.Run("wrong-proof-gets-no-handle", func(t *testing.T) {
		addr, done := startExporter(t, "--preset", "mnnvl", "--secret-file", sec, "--timeout", "5s", "-o", "json")
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = handshake(c, []byte("a secret that is not the one"), roleImporter)
		require.ErrorIs(t, err, errRefusedSecret)
		rest, _ := io.ReadAll(c)
		if len(rest) > 0 {
			assert.Equal(t, []byte{'V', 'M', 'P', 'R', pairVersion, kindRefuse, 0, 0}, rest, "after a wrong proof the exporter sends a bare refusal, nothing more")
		}
		o := <-done
		assert.Equal(t, causeSecret, pairJSON(t, o).Cause)
	})
}

// TestPairVerdicts names the cause of a refused import from both nodes' facts: the
// causes two processes of one machine cannot stage.
func TestPairVerdicts(t *testing.T) {
	node := func(host string, channel, daemon bool, clique string) pairNode {
		return pairNode{Host: host, Channel: channel, Daemon: daemon, Clique: clique}
	}
	const a, b = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1", "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.2"
	for _, tc := range []struct {
		name          string
		local, remote pairNode
		cause, diag   string
	}{
		{"importer without channel", node("h1", false, true, a), node("h2", true, true, a), causeNoChannel, "the importer (this process) has no IMEX channel"},
		{"same host", node("h1", true, false, ""), node("h1", true, false, ""), causeFailed, "memory exported on this same host"},
		{"no daemon here", node("h1", true, false, a), node("h2", true, true, a), causeNoDaemon, "not running on the importer's node"},
		{"no daemon there", node("h1", true, true, a), node("h2", true, false, a), causeNoDaemon, "not running on the exporter's node"},
		{"no daemon anywhere", node("h1", true, false, a), node("h2", true, false, a), causeNoDaemon, "not running on either node"},
		{"other clique", node("h1", true, true, a), node("h2", true, true, b), causeDomain, "different NVLink cliques"},
		{"other domain", node("h1", true, true, a), node("h2", true, true, a), causeDomain, "do not form one IMEX domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &pairRun{deadline: time.Now().Add(time.Minute)}
			r.rep.Local = &tc.local
			r.peer(tc.remote)
			r.importFailed(&cu.Error{Op: "cuMemImportFromShareableHandle", Err: cu.ERROR_OUT_OF_MEMORY})
			assert.Equal(t, causeFailed, r.rep.Cause, "out of memory is no IMEX problem")
			r = &pairRun{deadline: time.Now().Add(time.Minute)}
			r.rep.Local = &tc.local
			r.peer(tc.remote)
			r.importFailed(&cu.Error{Op: "cuMemImportFromShareableHandle", Err: cu.ERROR_NOT_SUPPORTED})
			assert.Equal(t, tc.cause, r.rep.Cause)
			assert.Contains(t, r.rep.Diagnosis, tc.diag)
			assert.False(t, r.rep.OK)
		})
	}
}

func TestPairUsage(t *testing.T) {
	sec := secretFile(t, testSecret)
	short := secretFile(t, "short")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pair", "--backend=sim"}, "pair needs one of --listen ADDR"},
		{[]string{"pair", "--backend=sim", "--listen", ":0", "--connect", "x:1"}, "pair needs one of --listen ADDR"},
		{[]string{"pair", "--backend=sim", "--connect", "x:1", "--timeout", "0s"}, "--timeout 0s: more than 0s and at most 24h0m0s"},
		{[]string{"pair", "--backend=sim", "--listen", ":0", "--timeout", "2562047h47m16s"}, "at most 24h0m0s"},
		{[]string{"pair", "--backend=sim", "--connect", "x:1", "--secret-file="}, "--secret-file: empty value"},
		{[]string{"check", "--backend=sim", "--listen", ":0"}, "--listen applies to pair only"},
		{[]string{"pair", "--backend=sim", "--connect", "x:1", "-o", "labels"}, `-o "labels": pair writes table, json`},
		{[]string{"pair", "--backend=sim", "--connect", "127.0.0.1:1", "--secret-file", short}, "the shared secret has 5 bytes"},
		{[]string{"pair", "--backend=sim", "--connect", "127.0.0.1:1", "--secret-file", filepath.Dir(sec)}, "not a regular file"},
	} {
		r := runWith(t, noDriver, tc.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%v", tc.args)
		assert.Empty(t, r.stdout, "%v", tc.args)
	}
	t.Setenv(envPairSecret, testSecret)
	for role, addrs := range map[string][]string{
		"--listen":  {"no-port-here", "127.0.0.1:no-such-port"},
		"--connect": {"no-port-here", "127.0.0.1:no-such-port", "127.0.0.1:", "127.0.0.1:0", "[::1]:0"},
	} {
		for _, addr := range addrs {
			r := runWith(t, noDriver, "pair", "--backend=sim", role, addr)
			assert.Equal(t, exitUsage, r.code, "%s %s: %s", role, addr, r.stderr)
			assert.Contains(t, r.stderr, role+` "`+addr+`"`)
			assert.Empty(t, r.stdout)
		}
	}
	t.Setenv(envPairSecret, "")
	r := runWith(t, noDriver, "pair", "--backend=sim", "--connect", "127.0.0.1:1")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--secret-file PATH or $"+envPairSecret)
	assert.NotContains(t, strings.ToLower(r.stderr), "correct horse")
}

// pairGoldenCases are the verdicts TestPairGolden stages, each side's table a golden file;
// pair-unreachable-importer.golden is the importer's alone.
var pairGoldenCases = []struct {
	name, exporter, importer string
	wrongSecret              bool
}{
	{"ok", "mnnvl", "mnnvl", false},
	{"exporter-without-channel", "mnnvl-no-channel", "mnnvl", false},
	{"importer-without-channel", "mnnvl", "mnnvl-no-channel", false},
	{"wrong-secret", "mnnvl", "mnnvl", true},
}

// TestPairGolden: the table each side prints, for each verdict sim can stage, against
// testdata/pair-NAME-ROLE.golden (go test -update rewrites them), each line unwrapped, with
// the times of the steps and the port replaced by placeholders.
func TestPairGolden(t *testing.T) {
	sec := secretFile(t, testSecret)
	other := secretFile(t, "another secret, of the same length")
	times := regexp.MustCompile(`\b(\d+(\.\d+)?)(ns|µs|ms|s)\b`)
	port := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	// Lines are joined first: how a line wraps depends on the widths of the times.
	cont := regexp.MustCompile(`\n {27,}`)
	norm := func(s string) string {
		return port.ReplaceAllString(times.ReplaceAllString(cont.ReplaceAllString(s, " "), "T"), "127.0.0.1:PORT")
	}
	for _, tc := range pairGoldenCases {
		isec := sec
		if tc.wrongSecret {
			isec = other
		}
		addr, done := startExporter(t, "--preset", tc.exporter, "--secret-file", sec, "--timeout", "2s")
		imp := runWith(t, backend.Opener{}, "pair", "--backend=sim", "--preset", tc.importer, "--connect", addr, "--secret-file", isec)
		exp := <-done
		for role, o := range map[string]outcome{"importer": imp, "exporter": exp} {
			golden(t, filepath.Join("testdata", "pair-"+tc.name+"-"+role+".golden"), norm(o.stdout))
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	o := runWith(t, backend.Opener{}, "pair", "--backend=sim", "--preset", "mnnvl", "--connect", addr, "--secret-file", sec, "--timeout", "300ms")
	got := regexp.MustCompile(`(error\s+).*`).ReplaceAllString(norm(o.stdout), "${1}ERROR")
	golden(t, filepath.Join("testdata", "pair-unreachable-importer.golden"), got)
}

// golden compares got with the file, or rewrites the file with -update.
func golden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), got, "%s: run go test -update if the change is intended", file)
}

// TestPairExporterOutlastsStrangers: a connection that does not prove the secret (a port
// scan, a wrong secret) is closed and the exporter waits on for the importer; a refusal
// frame anywhere but in place of a proof is a protocol error, not a refused secret.
func TestPairExporterOutlastsStrangers(t *testing.T) {
	sec := secretFile(t, testSecret)
	addr, done := startExporter(t, "--preset", "mnnvl", "--secret-file", sec, "-o", "json")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	c.Close()                     // a port scan
	for range 6 * maxHandshakes { // connections that say nothing, held open: at 2 s a batch, past --timeout
		idle, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer idle.Close()
	}
	c, err = net.Dial("tcp", addr)
	require.NoError(t, err)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = handshake(c, []byte("a secret that is not the one"), roleImporter)
	require.ErrorIs(t, err, errRefusedSecret)
	c.Close()
	imp := runWith(t, backend.Opener{}, "pair", "--backend=sim", "--preset", "mnnvl", "--connect", addr, "--secret-file", sec, "-o", "json")
	exp := <-done
	require.Equal(t, exitOK, imp.code, imp.stdout)
	require.Equal(t, exitOK, exp.code, exp.stdout)

	// A man in the middle that lets the handshake through and then refuses.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := handshake(c, []byte(testSecret), roleExporter); err == nil {
			_ = writeFrame(c, kindRefuse, nil)
		}
		_, _ = io.Copy(io.Discard, c)
	}()
	o := runWith(t, backend.Opener{}, "pair", "--backend=sim", "--preset", "mnnvl", "--connect", ln.Addr().String(), "--secret-file", sec, "-o", "json", "--timeout", "2s")
	assert.Equal(t, causeProtocol, pairJSON(t, o).Cause)
}

// slowNVML is a node whose NVML answers after d (a wedged driver).
type slowNVML struct {
	system
	d time.Duration
}

func (s slowNVML) NVML() nvml.Node { time.Sleep(s.d); return s.system.NVML() }

// TestPairTimeoutSaysOnlyWhatItRead: when the deadline passes while this side still reads
// its node, the report leaves the node out rather than stating the zero value's "no IMEX
// channel, no daemon" of a node that has both.
func TestPairTimeoutSaysOnlyWhatItRead(t *testing.T) {
	t.Setenv(envPairSecret, testSecret)
	cfg := sim.PresetMNNVL()
	d := testDeps(backend.Opener{CUDA: func() (vmm.Backend, error) { return sim.New(cfg) }})
	d.host = func() system { return slowNVML{simSystem(cfg), 3 * time.Second} }
	for _, format := range []string{"json", "table"} {
		var out, errb bytes.Buffer
		code := run([]string{"pair", "--backend=cuda", "--listen", "127.0.0.1:0", "--timeout", "1s", "-o", format}, &out, &errb, d)
		assert.Equal(t, exitCheckFailed, code, errb.String())
		if format == "table" {
			assert.Contains(t, out.String(), "not read before the deadline")
			continue
		}
		var rep pairReport
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
		assert.Equal(t, causeTimeout, rep.Cause)
		assert.Nil(t, rep.Local, "%s", out.String())
	}
}
