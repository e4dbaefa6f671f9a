package main

import (
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDaemonStopsWhileAPipeWriteHangs: --output-file is a named pipe whose reader stopped
// reading, so a refresh hangs in its write. The stop waits for it as long as for any
// refresh and exits 0: a pipe is never removed, so no late write can bring it back.
func TestDaemonStopsWhileAPipeWriteHangs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cuvmm.fifo")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// The reader: open, a one-page pipe, never read.
	r, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(r)
	if _, err := unix.FcntlInt(uintptr(r), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	d, tick, stop := daemonDeps(noDriver)
	w := &hookWriter{onWrite: func(string) {}}
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"check", "--backend=sim", "--preset=h100", "-o", "labels", "--output-file", path, "--interval=1m"}, &hookWriter{onWrite: func(string) {}}, w, d)
	}()
	hung := false
	for i := 0; i < 200 && !hung; i++ {
		select {
		case tick <- time.Time{}:
		case <-time.After(time.Second):
			hung = true // the refresh does not come back: its write waits for the reader
		}
	}
	if !hung {
		t.Fatal("the pipe never filled")
	}
	t0 := time.Now()
	close(stop)
	code := <-done
	took := time.Since(t0)
	w.mu.Lock()
	log := w.b.String()
	w.mu.Unlock()
	t.Logf("stop took %v, exit %d", took.Round(time.Millisecond), code)
	if code != exitOK {
		t.Errorf("exit %d, not 0 as docs/vmmprobe.md says for a pipe whose reader stopped reading; stderr:\n%s", code, log)
	}
	if took > stopGrace+time.Second {
		t.Errorf("the stop took %v, the documented wait is %v", took, stopGrace)
	}
}
