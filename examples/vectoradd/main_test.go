package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestRunsOnSim(t *testing.T) {
	for _, args := range [][]string{
		{"--backend=sim", "--n=100003"},
		{"--backend=sim", "--preset=hgx8", "--device=3", "--n=1"},
	} {
		var out, errb bytes.Buffer
		if code := realMain(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		s := out.String()
		if strings.Contains(s, "FAIL") {
			t.Fatal(s)
		}
		for _, want := range []string{"kernels need a GPU", "a: copied in and read back", "b: copied in and read back", "c: copied in and read back", "c: unmapped, released and freed"} {
			if !strings.Contains(s, want) {
				t.Errorf("%v: no %q in\n%s", args, want, s)
			}
		}
		t.Log(s)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--backend=nope"}, {"--preset=nope"}, {"--backend=cuda", "--preset=h100"}, {"extra"}, {"--n=0"}, {"--n=1000000000000"}, {"--device=-1"}} {
		var out, errb bytes.Buffer
		if code := realMain(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestNoSuchDevice(t *testing.T) {
	var out, errb bytes.Buffer
	if code := realMain([]string{"--backend=sim", "--device=1"}, &out, &errb); code != 1 {
		t.Errorf("device 1 of one: exit %d, want 1\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "no device 1") {
		t.Error(errb.String())
	}
}

func TestFirstWrong(t *testing.T) {
	a, b := inputs(1000)
	c := make([]float32, len(a))
	for i := range c {
		c[i] = a[i] + b[i]
	}
	if i := firstWrong(a, b, c); i != -1 {
		t.Fatalf("firstWrong = %d for the right sums", i)
	}
	c[777] = math.Nextafter32(c[777], 1e9)
	if i := firstWrong(a, b, c); i != 777 {
		t.Fatalf("firstWrong = %d, want 777 (one ulp off)", i)
	}
	c[3] = math.Float32frombits(sentinel)
	if i := firstWrong(a, b, c); i != 3 {
		t.Fatalf("firstWrong = %d, want 3 (the sentinel)", i)
	}
	if i := firstWrong(a, b, c[:10]); i != 0 {
		t.Fatalf("firstWrong = %d for a short c", i)
	}
	if got := decode(encode(a)); firstWrong(a, make([]float32, len(a)), got) != -1 {
		t.Fatal("encode/decode do not round-trip")
	}
	if firstDiffWord([]byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{1, 2, 3, 4, 5, 6, 7, 9}) != 1 || firstDiffWord([]byte{1, 2, 3, 4}, []byte{1, 2, 3, 4}) != -1 {
		t.Fatal("firstDiffWord")
	}
}
