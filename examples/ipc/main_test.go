package main

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/sim"
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

// Issue 8: the parent on one GPU, the child mapping the memory for another.
func TestRunsOnSimTwoDevices(t *testing.T) {
	var out, errb bytes.Buffer
	if code := realMain([]string{"--backend=sim", "--preset=hgx8", "--device=0", "--child-device=1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	s := out.String()
	if strings.Contains(s, "FAIL") {
		t.Fatal(s)
	}
	want := []string{"parent on device 0, child on device 1", "device 1 has peer access to device 0's memory"}
	if runtime.GOOS == "linux" {
		want = append(want,
			"parent: buffer of exportable memory on device 0",
			"child: on device 1, to map memory of device 0",
			"granted device 1 access",
			"the parent wrote on device 0 read back at",
			"wrote a reply in the last 4 KiB from device 1",
			"the child's write (from device 1) shows through the parent's own mapping on device 0")
	}
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("no %q in\n%s", w, s)
		}
	}
	t.Log(s)
}

func TestDeviceFlags(t *testing.T) {
	for _, args := range [][]string{{"--device=-1"}, {"--child-device=-2"}, {"--device=x"}, {"--child-device=x"}} {
		var out, errb bytes.Buffer
		if code := realMain(append([]string{"--backend=sim"}, args...), &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// A device the backend does not have: reported, exit 1, no child started.
	var out, errb bytes.Buffer
	if code := realMain([]string{"--backend=sim", "--child-device=1"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errb.String())
	}
	if s := out.String(); !strings.Contains(s, "no device 1: the sim backend has 1 device(s)") || strings.Contains(s, "started the child") {
		t.Error(s)
	}
}

func TestCheckDevicesNoPeer(t *testing.T) {
	cfg := sim.PresetHGX8()
	cfg.PeerAccess = make([][]bool, len(cfg.Devices))
	for i := range cfg.PeerAccess {
		cfg.PeerAccess[i] = make([]bool, len(cfg.Devices))
	}
	cfg.PeerAccess[0][1] = true // 0 reaches 1, not the other way round
	be, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDevices(be, devices{parent: 1, child: 0}); err != nil {
		t.Errorf("child 0 on memory of 1: %v", err)
	}
	if err := checkDevices(be, devices{parent: 2, child: 2}); err != nil {
		t.Errorf("one device: %v", err)
	}
	err = checkDevices(be, devices{parent: 0, child: 1})
	if err == nil || !strings.Contains(err.Error(), "device 1 has no peer access to device 0") {
		t.Errorf("child 1 on memory of 0: %v", err)
	}
	if err := checkDevices(be, devices{parent: 0, child: 8}); err == nil || !strings.Contains(err.Error(), "no device 8") {
		t.Errorf("device 8: %v", err)
	}
}
