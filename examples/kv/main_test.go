package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunsOnSim(t *testing.T) {
	var out, errb bytes.Buffer
	if code := realMain(append([]string{"--backend=sim"}, extraArgs...), &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if strings.Contains(out.String(), "FAIL") {
		t.Fatal(out.String())
	}
	t.Log(out.String())
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{{"--backend=nope"}, {"--preset=nope"}, {"--backend=cuda", "--preset=h100"}, {"extra"}} {
		if code := realMain(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

var extraArgs []string
