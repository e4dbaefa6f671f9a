package reexec

import (
	"os"
	"slices"
	"testing"
)

func TestCommand(t *testing.T) {
	t.Setenv(EnvRunner, "")
	c := Command("/bin/prog", "-a", "b")
	if want := []string{"/bin/prog", "-a", "b"}; c.Path != "/bin/prog" || !slices.Equal(c.Args, want) {
		t.Errorf("no runner: path %q, args %q; want /bin/prog, %q", c.Path, c.Args, want)
	}

	// A runner that is not on PATH keeps the name it was given: Start reports it.
	runner := "/nonexistent/qemu-aarch64-static"
	t.Setenv(EnvRunner, runner)
	c = Command("/bin/prog", "-a", "b")
	if want := []string{runner, "/bin/prog", "-a", "b"}; c.Path != runner || !slices.Equal(c.Args, want) {
		t.Errorf("runner %s: path %q, args %q; want %s, %q", runner, c.Path, c.Args, runner, want)
	}
	if err := c.Start(); err == nil {
		c.Process.Kill()
		t.Errorf("started through a runner that does not exist")
	}
}

// TestChildRuns starts this test binary again through Command, with whatever runner this
// run has: under go test -exec that is the wrapper's runner, and the child must start.
func TestChildRuns(t *testing.T) {
	if os.Getenv("CUVMM_REEXEC_TEST_CHILD") != "" {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := Command(exe, "-test.run=^TestChildRuns$")
	c.Env = append(os.Environ(), "CUVMM_REEXEC_TEST_CHILD=1")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("child %v (%s=%q): %v\n%s", c.Args, EnvRunner, os.Getenv(EnvRunner), err, out)
	}
}
