package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/sim"
)

// readCSV returns the rows of a CSV file as maps keyed by the header.
func readCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(recs) == 0 {
		t.Fatalf("%s: empty", path)
	}
	var out []map[string]string
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = rec[i]
		}
		out = append(out, m)
	}
	return out
}

func num(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestSimSmoke runs the command as CI would, on sim with small sizes: the growable buffer
// and the VMM strategies run, the cuMemAlloc ones are skipped with a note, the series and
// the summary are complete, and the capacity test reaches almost all of device memory.
func TestSimSmoke(t *testing.T) {
	dir := t.TempDir()
	series, summary := filepath.Join(dir, "growth.csv"), filepath.Join(dir, "summary.csv")
	var stdout, stderr bytes.Buffer
	code := run([]string{"--backend=sim", "-sim-mem", "8GiB", "-runs", "256MiB/64MiB,16MiB/2MiB", "-capacity",
		"-csv", series, "-summary", summary}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"backend sim", "growth 256MiB/64MiB (4 steps)", "growth 16MiB/2MiB (8 steps)",
		"buffer_geometric", "vmm_doubling", "need a CUDA context", "capacity: grow in 1GiB steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}

	vmmStrategies := []string{"buffer_geometric", "buffer_exact", "vmm_reserved", "vmm_doubling"}
	type key struct{ run, strategy string }
	rows := map[key][]map[string]string{}
	for _, r := range readCSV(t, series) {
		k := key{r["run"], r["strategy"]}
		rows[k] = append(rows[k], r)
	}
	for _, run := range []runSpec{{256 << 20, 64 << 20}, {16 << 20, 2 << 20}} {
		for _, s := range vmmStrategies {
			rs := rows[key{run.label(), s}]
			if len(rs) != run.steps() {
				t.Errorf("%s %s: %d points, want %d", run.label(), s, len(rs), run.steps())
				continue
			}
			var lastElapsed uint64
			for i, r := range rs {
				if got, want := num(t, r["size_bytes"]), uint64(i+1)*run.step; got != want {
					t.Errorf("%s %s point %d: size %d, want %d", run.label(), s, i, got, want)
				}
				e := num(t, r["elapsed_ns"])
				if e < lastElapsed {
					t.Errorf("%s %s point %d: elapsed %d after %d: not cumulative", run.label(), s, i, e, lastElapsed)
				}
				lastElapsed = e
				if used := num(t, r["used_bytes"]); used < num(t, r["size_bytes"]) {
					t.Errorf("%s %s point %d: %d bytes in use for a %s buffer", run.label(), s, i, used, r["size_bytes"])
				}
			}
			// The simulator's memory accounting is exact: every strategy ends holding the
			// total, and none of these holds more at any time.
			if peak := num(t, rs[len(rs)-1]["peak_bytes"]); peak != run.total {
				t.Errorf("%s %s: peak %d, want %d", run.label(), s, peak, run.total)
			}
		}
		for _, s := range []string{"memalloc_doubling", "memalloc_exact"} {
			if len(rows[key{run.label(), s}]) != 0 {
				t.Errorf("%s %s: has points on sim", run.label(), s)
			}
		}
	}

	sum := map[key]map[string]string{}
	for _, r := range readCSV(t, summary) {
		sum[key{r["run"], r["strategy"]}] = r
	}
	for _, run := range []string{"256MiB/64MiB", "16MiB/2MiB"} {
		for _, s := range vmmStrategies {
			r := sum[key{run, s}]
			if r == nil || r["status"] != "ok" || num(t, r["calls"]) == 0 {
				t.Errorf("summary %s %s: %v", run, s, r)
			}
		}
		for _, s := range []string{"memalloc_doubling", "memalloc_exact"} {
			if r := sum[key{run, s}]; r == nil || r["status"] != "skipped" || !strings.Contains(r["detail"], "context") {
				t.Errorf("summary %s %s: %v, want skipped with a note", run, s, r)
			}
		}
	}
	// Geometric growth commits O(log n) chunks: fewer calls than one chunk per step.
	if g, e := num(t, sum[key{"16MiB/2MiB", "buffer_geometric"}]["calls"]), num(t, sum[key{"16MiB/2MiB", "buffer_exact"}]["calls"]); g >= e {
		t.Errorf("16MiB/2MiB: geometric made %d calls, exact %d", g, e)
	}
	c := sum[key{"capacity", "buffer_exact"}]
	if c == nil || c["status"] != "out_of_memory" {
		t.Fatalf("capacity buffer_exact: %v", c)
	}
	if reached, dev := num(t, c["reached_bytes"]), num(t, c["device_bytes"]); reached < dev*9/10 || reached > dev {
		t.Errorf("capacity buffer_exact: reached %d of %d", reached, dev)
	}
	if c := sum[key{"capacity", "memalloc_doubling"}]; c == nil || c["status"] != "skipped" {
		t.Errorf("capacity memalloc_doubling: %v, want skipped", c)
	}
}

// TestRefusedHints takes vmm_doubling's and the buffer's remap paths: with every hint
// refused, each doubling moves the whole buffer, and the data stays mapped.
func TestRefusedHints(t *testing.T) {
	dir := t.TempDir()
	summary := filepath.Join(dir, "summary.csv")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-backend", "sim", "-sim-refuse-hints", "-total", "32MiB", "-step", "2MiB", "-reserve", "4MiB",
		"-strategies", "buffer_exact,vmm_doubling", "-summary", summary}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, r := range readCSV(t, summary) {
		// grow.c counts its first reservation as a remap: 2, 4, 8, 16, 32 MiB.
		if r["strategy"] == "vmm_doubling" && (r["remaps"] != "5" || r["extends"] != "0") {
			t.Errorf("vmm_doubling: %s remaps, %s extends; want 5 and 0", r["remaps"], r["extends"])
		}
		// The buffer starts with 4MiB reserved and moves at 6, 10 and 18 MiB.
		if r["strategy"] == "buffer_exact" && (r["remaps"] != "3" || r["extends"] != "0") {
			t.Errorf("buffer_exact: %s remaps, %s extends; want 3 and 0", r["remaps"], r["extends"])
		}
		if r["status"] != "ok" || r["peak_bytes"] != strconv.Itoa(32<<20) {
			t.Errorf("%s: %v", r["strategy"], r)
		}
	}
}

// TestStrategiesReleaseEverything checks on sim that every strategy leaves nothing behind,
// after a growth and after a driver failure in the middle of one, with the fixed-address
// hint honoured (vmm_doubling extends its reservation and unmaps across the extensions) and
// refused (it remaps).
func TestStrategiesReleaseEverything(t *testing.T) {
	cfg := &config{meminfo: true}
	r := runSpec{total: 64 << 20, step: 2 << 20}
	for _, st := range strategies {
		if st.needsContext {
			continue
		}
		for _, tc := range []struct {
			fail   sim.Op
			faulty bool
			refuse bool
		}{{refuse: false}, {refuse: true}, {sim.OpCreate, true, false}, {sim.OpMap, true, true}, {sim.OpSetAccess, true, true}, {sim.OpReserve, true, true}, {sim.OpReserve, true, false}} {
			fail := "nothing"
			d, err := openDevice("sim", 0, simOptions{preset: "h100", refuseHints: tc.refuse})
			if err != nil {
				t.Fatal(err)
			}
			if tc.faulty {
				fail = tc.fail.String()
				// The 5th call of the operation fails, in the middle of the growth (not with
				// OUT_OF_MEMORY, which the geometric buffer answers with a smaller chunk).
				if err := d.sim.FailNth(tc.fail, 5, cu.ERROR_UNKNOWN); err != nil {
					t.Fatal(err)
				}
			}
			res := runStrategy(d, st, r, cfg, false)
			switch {
			case !tc.faulty && res.err != nil:
				t.Errorf("%s: %v", st.name, res.err)
			case tc.faulty && tc.fail != sim.OpReserve && res.err == nil:
				t.Errorf("%s, %s failing: no error", st.name, fail)
			case testing.Verbose():
				t.Logf("%s, %s failing: %v", st.name, fail, res.err)
			}
			d.sim.ClearFaults()
			if st := d.sim.Stats(); !st.Clean() {
				t.Errorf("%s, %s failing, hints refused %v: left %+v", res.strategy, fail, tc.refuse, st)
			}
		}
	}
}

func TestCapacityStopsAtOutOfMemory(t *testing.T) {
	d, err := openDevice("sim", 0, simOptions{preset: "h100", mem: 10 << 30})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := runCapacity(d, &config{meminfo: true, capStep: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].strategy != "buffer_exact" || rs[0].reached != 10<<30 || rs[0].stoppedBy == nil || rs[0].err != nil {
		t.Fatalf("capacity: %+v", rs[0])
	}
	if !d.sim.Stats().Clean() {
		t.Errorf("capacity test left %+v", d.sim.Stats())
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	noDir := filepath.Join(dir, "no", "such", "dir.csv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-runs", "16GiB"}, "want TOTAL/STEP"},
		{[]string{"-runs", "16GB/64MiB"}, `unit "GB"`},
		{[]string{"-runs", "1GiB/3MiB"}, "multiple of the step"},
		{[]string{"-runs", "0/2MiB"}, "more than 0"},
		{[]string{"-runs", "4GiB/1KiB"}, "steps, more than"},
		{[]string{"-runs", "99999999999999GiB/2MiB"}, "too large"},
		{[]string{"-runs", ""}, "nothing to do"},
		{[]string{"-runs", "1GiB/2MiB", "-total", "2GiB"}, "one or the other"},
		{[]string{"-step", "0"}, "more than 0"},
		{[]string{"-total", "x"}, "whole number"},
		{[]string{"--backend=sim", "-total", "3MiB", "-step", "3MiB"}, "multiple of the allocation granularity"},
		{[]string{"--backend=sim", "-capacity", "-capacity-step", "1MiB", "-runs", ""}, "multiple of the allocation granularity"},
		{[]string{"--backend=opencl"}, "want auto, cuda or sim"},
		{[]string{"--backend=sim", "-preset", "tpu"}, "no such sim preset"},
		{[]string{"--backend=sim", "-device", "3"}, "has 1 device"},
		{[]string{"--backend=sim", "-device", "-1"}, "0 or more"},
		{[]string{"-strategies", "vmm_reserved,magic"}, `unknown strategy "magic"`},
		{[]string{"-reserve", "lots"}, "-reserve"},
		{[]string{"-sim-mem", "0"}, "more than 0"},
		{[]string{"-capacity-step", "0"}, "more than 0"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
		{[]string{"--backend=sim", "-total", "4MiB", "-step", "2MiB", "-csv", noDir}, openErr(t, noDir, os.O_RDWR|os.O_CREATE|os.O_TRUNC)},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
	}
}

func TestFailureExitCode(t *testing.T) {
	// 8 GiB of device memory cannot hold a 16 GiB buffer: every strategy fails, cleanly.
	var stdout, stderr bytes.Buffer
	code := run([]string{"--backend=sim", "-sim-mem", "8GiB", "-total", "16GiB", "-step", "1GiB"}, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "CUDA_ERROR_OUT_OF_MEMORY") || !strings.Contains(stdout.String(), "FAILED") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "4096": 4096, "7B": 7, "2MiB": 2 << 20, "2m": 2 << 20, "16GiB": 16 << 30,
		"16G": 16 << 30, " 1TiB ": 1 << 40, "512KiB": 512 << 10, "64 MiB": 64 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "1.5GiB", "2MB", "16777216TiB", "99999999999999999999"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q): no error", in)
		}
	}
}

func TestWarmUpLeavesNothing(t *testing.T) {
	d, err := openDevice("sim", 0, simOptions{preset: "h100"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.warmUp(); err != nil {
		t.Fatal(err)
	}
	if st := d.sim.Stats(); !st.Clean() || d.be.calls != 0 {
		t.Errorf("warm-up left %+v, %d calls counted", st, d.be.calls)
	}
}

// openErr is the system's own words for why opening path with flag fails, which differ
// between systems ("no such file or directory", "The system cannot find the path
// specified."): the program must pass them on.
func openErr(t *testing.T, path string, flag int) string {
	t.Helper()
	f, err := os.OpenFile(path, flag, 0o644)
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("opening %s: %v, want an error saying it does not exist", path, err)
	}
	return pe.Err.Error()
}

// TestDefaultBackendIsNotAUsageError: the default (the real driver) with no flags gets as
// far as opening the driver; here, without one, that fails as a missing driver, not as a
// misuse of --preset (the default preset belongs to the simulator only).
func TestDefaultBackendIsNotAUsageError(t *testing.T) {
	_, err := openDevice(backend.CUDA, 0, simOptions{preset: "h100"})
	var ue usageError
	if errors.As(err, &ue) {
		t.Fatalf("openDevice(cuda) = %v: a usage error", err)
	}
}
