// Command testsum reads go test -json on standard input and writes what a person needs: one
// line per package, the output of every failed test and of every build failure, and the
// counts of passed, failed and skipped tests (subtests included). It exits 1 when a test or
// a package failed, or when the input held no test results at all.
//
// Usage: go test -json ./... | go run ./.ci/testsum [COUNTS_FILE]
//
// COUNTS_FILE, when given, gets the counts line alone (for .ci/run's summary).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of go test -json (cmd/test2json), build events included.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string // build-output and build-fail events
}

type counts struct{ passed, failed, skipped, packages, failedPackages int }

func main() {
	c, failures, err := summarize(os.Stdin, os.Stdout)
	line := fmt.Sprintf("passed %d, failed %d, skipped %d", c.passed, c.failed, c.skipped)
	fmt.Printf("tests: %s (%d packages, %d failed)\n", line, c.packages, c.failedPackages)
	for _, f := range failures {
		fmt.Println("FAILED:", f)
	}
	if len(os.Args) > 1 {
		if werr := os.WriteFile(os.Args[1], []byte(line+"\n"), 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(1)
	}
	if c.failed > 0 || c.failedPackages > 0 || len(failures) > 0 {
		os.Exit(1)
	}
}

// summarize copies the readable parts of the test stream r to w and counts the results; it
// returns the failed tests and packages by name.
func summarize(r io.Reader, w io.Writer) (counts, []string, error) {
	var c counts
	var failures []string
	output := map[string][]string{} // test or package -> its output so far
	key := func(e event) string { return e.Package + " " + e.Test }
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	results := 0
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text()) // go's own messages (vet, setup), never hidden
			continue
		}
		switch e.Action {
		case "build-output":
			output["build "+e.ImportPath] = append(output["build "+e.ImportPath], e.Output)
		case "build-fail":
			failures = append(failures, "build of "+e.ImportPath)
			fmt.Fprintf(w, "BUILD FAILED %s\n%s", e.ImportPath, strings.Join(output["build "+e.ImportPath], ""))
		case "output":
			output[key(e)] = append(output[key(e)], e.Output)
		case "pass", "fail", "skip":
			results++
			if e.Test == "" {
				c.packages++
				out := output[key(e)]
				switch {
				case e.Action == "fail":
					c.failedPackages++
					// The package's own output holds what no test owns: a panic, a timeout,
					// a TestMain that failed.
					fmt.Fprintf(w, "FAIL %s (%.1fs)\n%s", e.Package, e.Elapsed, strings.Join(out, ""))
					failures = append(failures, e.Package)
				case e.Action == "skip":
					fmt.Fprintf(w, "?    %s (no tests)\n", e.Package)
				default:
					fmt.Fprintf(w, "ok   %s (%.1fs)\n", e.Package, e.Elapsed)
				}
				continue
			}
			switch e.Action {
			case "pass":
				c.passed++
			case "skip":
				c.skipped++
			case "fail":
				c.failed++
				failures = append(failures, e.Package+" "+e.Test)
				fmt.Fprintf(w, "--- FAIL %s %s\n%s", e.Package, e.Test, strings.Join(output[key(e)], ""))
			}
			delete(output, key(e))
		}
	}
	if err := sc.Err(); err != nil {
		return c, failures, err
	}
	if results == 0 {
		return c, failures, fmt.Errorf("no test results in the input")
	}
	return c, failures, nil
}
