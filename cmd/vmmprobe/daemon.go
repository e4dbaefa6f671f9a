package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runDaemon keeps --output-file up to date, as gpu-feature-discovery keeps its feature
// file: it writes it now and every --interval, and when SIGTERM or SIGINT arrives it
// removes it and exits 0, so that labels or metrics never outlive the daemon (a node
// drained of its daemon loses them at once; one whose daemon died hard loses the labels
// when their # +expiry-time passes).
//
// The backend was opened once, before: a driver that did not initialize stays so for the
// life of the process (cuInit's failure is sticky), so then the daemon writes what it
// knows once and exits 3 for its supervisor to restart it. A failed write is reported and
// tried again at the next tick.
//
// It logs one line at start, one per refresh (how long it took, what changed in the
// output) and one at exit, each "vmmprobe: daemon EVENT key=value ..."; --quiet leaves
// only warnings and errors.
func runDaemon(sel *opened, opts options, d deps, warnOut func(string)) int {
	// A refresh the daemon stopped without may still be under way.
	warn, silence := untilReturn(warnOut)
	defer silence()
	logf := func(format string, a ...any) {
		if !opts.quiet {
			warn("daemon " + fmt.Sprintf(format, a...))
		}
	}
	stop, release := d.signals()
	defer release()
	tick, stopTick := d.ticker(opts.interval)
	defer stopTick()
	logf("start output=%s format=%s interval=%v backend=%s", opts.outputFile, opts.format, opts.interval, sel.info.Name)
	var last []byte
	var w writes
	logRefresh := func(n int, t0 time.Time, r refreshed) {
		if r.err != nil {
			warn(r.err.Error())
		} else if r.out != nil {
			logf("refresh n=%d took=%v exit=%d %s", n, time.Since(t0).Round(time.Millisecond), r.code, changes(last, r.out))
			last = r.out
		}
	}
	for n := 1; ; n++ {
		t0 := time.Now()
		// On its own goroutine, so that a stop is obeyed even while a refresh does not
		// return: a driver or NVML call that hangs, a named pipe whose reader stopped
		// reading.
		done := make(chan refreshed, 1)
		go func() { done <- refresh(sel, opts, d, warn, &w) }()
		var r refreshed
		select {
		case r = <-done:
		case <-stop:
			select { // a refresh about to finish may
			case r = <-done:
				logRefresh(n, t0, r)
			case <-time.After(stopGrace):
				warn(fmt.Sprintf("daemon refresh n=%d still under way after %v: stopping without it", n, time.Since(t0).Round(time.Millisecond)))
			}
			return stopDaemon(opts.outputFile, &w, warn, logf)
		}
		logRefresh(n, t0, r)
		if r.code == exitNoDriver || r.code == exitNoDevice {
			logf("exit code=%d reason=%q", r.code, "the driver did not initialize, which lasts for the process: restart to try again")
			return r.code
		}
		select {
		case <-stop:
			return stopDaemon(opts.outputFile, &w, warn, logf)
		case <-tick:
		}
	}
}

// stopGrace is how long a stop waits for a refresh under way.
const stopGrace = 2 * time.Second

// refreshed is what one refresh made: the output written (nil when there was none), the
// probe's exit code, and why the output could not be made or written.
type refreshed struct {
	out  []byte
	code int
	err  error
}

// refresh probes, renders and writes the output once, unless the daemon stopped meanwhile.
func refresh(sel *opened, opts options, d deps, warn func(string), w *writes) refreshed {
	doc, code := probe(sel, opts, d, warn)
	if doc == nil {
		return refreshed{code: code}
	}
	out, err := render(doc, opts, d)
	if err == nil {
		var wrote bool
		if wrote, err = w.do(func() error { return writeOutput(opts.outputFile, out) }); !wrote {
			return refreshed{code: code}
		}
	}
	if err != nil {
		return refreshed{code: code, err: err}
	}
	return refreshed{out: out, code: code}
}

// writes are the daemon's writes of its output: a refresh writes holding the lock, and the
// stop ends them once none is under way, before it removes the output, so that no write
// lands after the removal.
type writes struct {
	mu    sync.Mutex
	ended bool
}

// do runs write unless the writes have ended, and reports whether it ran.
func (w *writes) do(write func() error) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false, nil
	}
	return true, write()
}

// end ends the writes, once the one under way, if any, is done; false, ending nothing,
// when it is not done within wait (a write that hangs).
func (w *writes) end(wait time.Duration) bool {
	for deadline := time.Now().Add(wait); !w.mu.TryLock(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	w.ended = true
	w.mu.Unlock()
	return true
}

// stopDaemon ends the writes, removes the output and says so.
func stopDaemon(path string, w *writes, warn func(string), logf func(string, ...any)) int {
	target, err := removable(path)
	if err == nil && target != "" { // a pipe or device has nothing a late write could bring back
		if !w.end(stopGrace) {
			warn("output file " + path + ": a write is still under way: left in place, to expire")
			return exitFailure
		}
		err = removeOutput(path)
	}
	if err != nil {
		warn(err.Error())
		return exitFailure
	}
	logf("exit code=0 reason=signal removed=%s", path)
	return exitOK
}

// changes says what differs between two outputs, line by line, leaving out the lines that
// change every time (comments, the generation time, Prometheus's timestamp gauge):
// "changed=0", or "changed=N keys=a,b" with the keys (the text before '=', '{', ':' or ' ')
// of up to five changed lines.
func changes(before, after []byte) string {
	if before == nil {
		return "changed=all (first)"
	}
	count := func(b []byte) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(string(b), "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") && !strings.Contains(t, "generated_at") && !strings.HasPrefix(t, "cuvmm_probe_timestamp_seconds") {
				m[l]++
			}
		}
		return m
	}
	b, a := count(before), count(after)
	seen := map[string]bool{}
	n := 0
	for _, side := range []struct{ x, y map[string]int }{{a, b}, {b, a}} {
		for l, c := range side.x {
			if side.y[l] == c {
				continue
			}
			n++
			k := strings.TrimSpace(l)
			if i := strings.IndexAny(k, "={: "); i > 0 {
				k = k[:i]
			}
			seen[strings.Trim(k, `"`)] = true
		}
	}
	if n == 0 {
		return "changed=0"
	}
	keys := slices.Sorted(maps.Keys(seen))
	if len(keys) > 5 {
		keys = append(keys[:5], "...")
	}
	return fmt.Sprintf("changed=%d keys=%s", n, strings.Join(keys, ","))
}

// removeOutput removes what writeOutput wrote at path: the regular file it names (through
// symbolic links, which stay). A device, a pipe or this process's standard output or error
// is left alone, and a file already gone is no error.
func removeOutput(path string) error {
	target, err := removable(path)
	if err != nil || target == "" {
		return err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("output file %s: %w", path, err)
	}
	return nil
}

// removable returns the regular file path names that removeOutput would remove, "" for
// nothing to remove.
func removable(path string) (string, error) {
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("output file %s: %w", path, err)
	}
	fi, err := os.Lstat(target)
	if err != nil || !fi.Mode().IsRegular() || stdio(fi) != nil {
		return "", nil
	}
	return target, nil
}

// watchSignals closes stop when SIGTERM (Kubernetes stopping a pod) or SIGINT arrives.
// Only the daemon watches: elsewhere the signals end vmmprobe as they normally do.
func watchSignals() (stop <-chan struct{}, release func()) {
	ctx, release := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	return ctx.Done(), release
}
