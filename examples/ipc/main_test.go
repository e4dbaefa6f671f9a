package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary play the child the example starts (os.Executable is the
// test binary here).
func TestMain(m *testing.M) {
	for _, a := range os.Args[1:] {
		if a == "--child" {
			os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(m.Run())
}

func TestRunsOnSim(t *testing.T) {
	var out, errb bytes.Buffer
	if code := realMain([]string{"--backend=sim"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if strings.Contains(out.String(), "FAIL") {
		t.Fatal(out.String())
	}
	t.Log(out.String())
}
