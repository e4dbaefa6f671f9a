package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
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
func runDaemon(sel *opened, opts options, d deps, warn func(string)) int {
	stop, release := d.signals()
	defer release()
	tick, stopTick := d.ticker(opts.interval)
	defer stopTick()
	for {
		doc, code := probe(sel, opts, d, warn)
		if doc != nil {
			if err := emit(doc, opts, d, nil); err != nil {
				warn(err.Error())
			}
		}
		if code == exitNoDriver || code == exitNoDevice {
			return code
		}
		select {
		case <-stop:
			if err := removeOutput(opts.outputFile); err != nil {
				warn(err.Error())
				return exitFailure
			}
			return exitOK
		case <-tick:
		}
	}
}

// removeOutput removes what writeOutput wrote at path: the regular file it names (through
// symbolic links, which stay). A device or pipe is left alone, and a file already gone is
// no error.
func removeOutput(path string) error {
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output file %s: %w", path, err)
	}
	fi, err := os.Lstat(target)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("output file %s: %w", path, err)
	}
	return nil
}

// watchSignals closes stop when SIGTERM (Kubernetes stopping a pod) or SIGINT arrives.
// Only the daemon watches: elsewhere the signals end vmmprobe as they normally do.
func watchSignals() (<-chan struct{}, func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case <-sig:
			close(stop)
		case <-done:
		}
	}()
	return stop, func() {
		signal.Stop(sig)
		close(done)
	}
}
