package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample is bench/grow's -csv output, shortened: two runs, three strategies each (one with
// a name that needs escaping), rows of one series out of order.
const sample = `run,strategy,step,size_bytes,elapsed_ns,used_bytes,peak_bytes,calls
256MiB/64MiB,buffer_geometric,1,67108864,50000,67108864,67108864,5
256MiB/64MiB,buffer_geometric,2,134217728,60000,134217728,134217728,8
256MiB/64MiB,buffer_geometric,4,268435456,80000,268435456,268435456,12
256MiB/64MiB,buffer_geometric,3,201326592,70000,268435456,268435456,11
256MiB/64MiB,vmm_reserved,1,67108864,40000,67108864,67108864,4
256MiB/64MiB,vmm_reserved,2,134217728,90000,134217728,134217728,7
256MiB/64MiB,vmm_reserved,3,201326592,130000,201326592,201326592,10
256MiB/64MiB,vmm_reserved,4,268435456,170000,268435456,268435456,13
256MiB/64MiB,memalloc_exact,1,67108864,30000,67108864,67108864,1
256MiB/64MiB,memalloc_exact,2,134217728,900000,134217728,201326592,4
256MiB/64MiB,memalloc_exact,3,201326592,9000000,201326592,335544320,7
256MiB/64MiB,memalloc_exact,4,268435456,90000000,268435456,469762048,10
4MiB/2MiB,buffer_geometric,1,2097152,10000,2097152,2097152,5
4MiB/2MiB,buffer_geometric,2,4194304,11000,4194304,4194304,8
4MiB/2MiB,vmm_reserved,1,2097152,9000,2097152,2097152,4
4MiB/2MiB,vmm_reserved,2,4194304,15000,4194304,4194304,7
4MiB/2MiB,"a<b&""c""",1,2097152,0,2097152,2097152,4
4MiB/2MiB,"a<b&""c""",2,4194304,20000,4194304,4194304,7
`

// elements parses svg with encoding/xml (failing the test if it is not well-formed) and
// counts the elements by name, and the text of the <title> elements inside paths.
func elements(t *testing.T, svg []byte) (map[string]int, []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	counts := map[string]int{}
	var stack []string
	var titles []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
				if tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", tok.Name.Space)
				}
			}
			counts[tok.Name.Local]++
			stack = append(stack, tok.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if n := len(stack); n >= 2 && stack[n-1] == "title" && stack[n-2] == "path" {
				titles = append(titles, string(tok))
			}
		}
	}
	if root != "svg" || len(stack) != 0 {
		t.Fatalf("root %q, %d elements left open", root, len(stack))
	}
	return counts, titles
}

func TestRender(t *testing.T) {
	panels, err := readSeries(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(panels) != 2 || panels[0].run != "256MiB/64MiB" || len(panels[0].series) != 3 || len(panels[1].series) != 3 {
		t.Fatalf("panels: %+v", panels)
	}
	g := panels[0].series[0]
	for i, want := range []float64{0.0625, 0.125, 0.1875, 0.25} {
		if g.points[i].x != want {
			t.Errorf("buffer_geometric point %d: x %v, want %v (sorted by size)", i, g.points[i].x, want)
		}
	}
	for _, mode := range []string{"auto", "on", "off"} {
		svg := render(panels, "growth & <time>", "H100, driver 580", mode)
		counts, titles := elements(t, svg)
		// One path per strategy and panel, nothing else drawn with paths.
		if counts["path"] != 6 {
			t.Errorf("-log %s: %d paths, want 6", mode, counts["path"])
		}
		want := []string{"buffer_geometric", "vmm_reserved", "memalloc_exact", "buffer_geometric", "vmm_reserved", `a<b&"c"`}
		if strings.Join(titles, "|") != strings.Join(want, "|") {
			t.Errorf("-log %s: path titles %q, want %q", mode, titles, want)
		}
		if counts["g"] != 2 {
			t.Errorf("-log %s: %d panels, want 2", mode, counts["g"])
		}
		s := string(svg)
		// The first panel spans more than two decades: auto goes logarithmic there.
		if got := strings.Count(s, "log scale"); (mode == "off" && got != 0) || (mode == "on" && got != 2) || (mode == "auto" && got != 1) {
			t.Errorf("-log %s: %d panels on a log scale", mode, got)
		}
		if !strings.Contains(s, "to 256MiB in 64MiB steps") || !strings.Contains(s, "growth &amp; &lt;time&gt;") {
			t.Errorf("-log %s: titles missing or unescaped", mode)
		}
		if strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
			t.Errorf("-log %s: NaN or Inf in the SVG", mode)
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "growth.csv"), filepath.Join(dir, "growth.svg")
	if err := os.WriteFile(in, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-in", in, "-o", out, "-subtitle", "test"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if counts, _ := elements(t, svg); counts["path"] != 6 {
		t.Errorf("%d paths", counts["path"])
	}
	// To standard output without -o.
	stdout.Reset()
	if code := run([]string{"-in", in}, &stdout, &stderr); code != 0 || !bytes.HasPrefix(stdout.Bytes(), []byte("<?xml")) {
		t.Errorf("exit %d, stdout %.40q", code, stdout.String())
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	missing, noDir := filepath.Join(dir, "missing.csv"), filepath.Join(dir, "no", "dir", "x.svg")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-in", write("empty.csv", "")}, 1, "no header"},
		{[]string{"-in", write("header.csv", "run,strategy,step,size_bytes,elapsed_ns\n")}, 1, "no data rows"},
		{[]string{"-in", write("cols.csv", "run,strategy,size\nx,y,1\n")}, 1, `no "size_bytes" column`},
		{[]string{"-in", write("num.csv", "run,strategy,size_bytes,elapsed_ns\nr,s,12,abc\n")}, 1, `line 2: elapsed_ns "abc"`},
		{[]string{"-in", write("neg.csv", "run,strategy,size_bytes,elapsed_ns\nr,s,-1,5\n")}, 1, "size_bytes"},
		{[]string{"-in", write("short.csv", "run,strategy,size_bytes,elapsed_ns\nr,s,1\n")}, 1, "no elapsed_ns field"},
		{[]string{"-in", write("blank.csv", "run,strategy,size_bytes,elapsed_ns\n,s,1,1\n")}, 1, "empty run"},
		{[]string{"-in", write("quote.csv", "run,strategy,size_bytes,elapsed_ns\n\"r,s,1,1\n")}, 1, "quote"},
		{[]string{"-in", missing}, 1, openErr(t, missing, os.O_RDONLY)},
		{[]string{"-in", write("ok.csv", sample), "-o", noDir}, 1, openErr(t, noDir, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)},
		{[]string{"-log", "sometimes"}, 2, "want auto, on or off"},
		{[]string{"stray"}, 2, "unexpected arguments"},
		{[]string{"-bogus"}, 2, "not defined"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		hi   float64
		want string
	}{{16, "0 4 8 12 16"}, {4, "0 1 2 3 4"}, {0.25, "0 0.0625 0.125 0.1875 0.25"}, {1, "0 0.25 0.5 0.75 1"},
		{10, "0 2 4 6 8 10"}, {79, "0 20 40 60 80"}, {0.3, "0 0.1 0.2 0.3"}, {0, "0 1"}} {
		var got []string
		for _, v := range niceTicks(0, tc.hi) {
			got = append(got, fmtTick(v))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("niceTicks(0, %v) = %v, want %s", tc.hi, got, tc.want)
		}
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
