// Command vmmprobe tells an operator what the CUDA driver's virtual memory management,
// shareable handles (POSIX file descriptors, fabric) and multicast can really do on this
// node, and why not: the node's NVLink fabric (NVML, NVSwitches, Fabric Manager, IMEX) is
// part of the report. `vmmprobe check` proves each feature by doing it; `vmmprobe env`
// prints the settings a job on the node should use; `vmmprobe ready` gives an exit code a
// Kubernetes probe or a CI step can gate on.
//
// See docs/vmmprobe.md for the output formats, the JSON schema and the decision rules, and
// --help for flags and exit codes.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/internal/buildinfo"
	"github.com/cuvmm/cuvmm/vmm"
)

// Exit codes, documented in --help, the README and docs/vmmprobe.md.
const (
	exitOK          = 0
	exitFailure     = 1 // a runtime failure: the output could not be written
	exitUsage       = 2
	exitNoDriver    = 3 // no CUDA driver could be loaded, or it did not initialize
	exitNoDevice    = 4
	exitCheckFailed = 5 // check and env: a check failed
	exitNotReady    = 6 // ready: a requirement is not met
)

// deps are what run reaches outside itself; tests replace them.
type deps struct {
	open backend.Opener
	// host is the node this process runs on (hostSystem); a simulated backend brings its
	// own.
	host func() system
	now  func() time.Time
	// build is what the toolchain recorded of this binary (--version, the documents).
	build buildinfo.Info
	// signals starts watching for the signals that end the daemon: the channel is closed
	// when one arrives; release stops watching.
	signals func() (stop <-chan struct{}, release func())
	// ticker ticks every d (time.NewTicker; tests tick by hand).
	ticker func(d time.Duration) (tick <-chan time.Time, stop func())
	// root is the machine's file system, whose /proc the checkpoint preflight reads.
	root fs.FS
	// checkpointer is the checkpoint driver of a backend (checkpoint.For), and gpus lists
	// the CUDA devices with their free memory for a restore (cudaDevices; nil: none known).
	checkpointer func(vmm.Backend) checkpoint.Driver
	gpus         func(vmm.Backend) ([]device, error)
}

// untilReturn wraps warn for a command whose goroutines may outlive it (a step left at its
// deadline): one writer at a time, and none once silence is called, as the command returns.
func untilReturn(warn func(string)) (guarded func(string), silence func()) {
	var mu sync.Mutex
	done := false
	guarded = func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			warn(msg)
		}
	}
	return guarded, func() { mu.Lock(); done = true; mu.Unlock() }
}

// program names this vmmprobe in what it writes.
func (d deps) program() programInfo {
	return programInfo{Version: d.build.Version, Revision: d.build.Revision}
}

func defaultDeps() deps {
	return deps{
		open:    backend.Opener{},
		host:    func() system { return newHostSystem() },
		now:     time.Now,
		build:   buildinfo.Read(),
		signals: watchSignals,
		ticker: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
		root:         os.DirFS("/"),
		checkpointer: checkpoint.For,
		gpus:         backendGPUs,
	}
}

func main() {
	if code, ok := runChildIfRequested(backend.Opener{}); ok {
		os.Exit(code)
	}
	// Standard output closed under us (vmmprobe ... | head) is a write error, exit 1, not
	// death by SIGPIPE; notified rather than ignored, so that children start with the default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, defaultDeps()))
}

func run(args []string, stdout, stderr io.Writer, d deps) int {
	opts, code := parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	warn := func(msg string) { fmt.Fprintln(stderr, "vmmprobe:", msg) }
	if opts.showVersion {
		if _, err := fmt.Fprintln(stdout, "vmmprobe "+d.build.String()); err != nil {
			warn("standard output: " + err.Error())
			return exitFailure
		}
		return exitOK
	}
	if opts.command == cmdCheckpointCheck { // /proc only: no driver needed
		return runCheckpoint(nil, opts, d, stdout, warn)
	}
	sel, code, err := open(d.open, opts.backend, opts.format == formatTable && (opts.command == cmdReport || opts.command == cmdCheck))
	if err != nil {
		switch code {
		case exitNoDevice:
			warn("no CUDA device: " + errText(err))
		case exitNoDriver:
			warn("no CUDA driver: " + driverReason(err))
			warn("without a GPU, add --backend=sim to run on a simulated node (--preset names one: vmmprobe --help)")
		default:
			warn(errText(err))
		}
		return code
	}
	if sel.info.Fallback != "" {
		warn(fmt.Sprintf("no CUDA driver (%s); showing the simulated %q preset instead", sel.info.Fallback, sel.info.Preset))
	}
	if opts.interval > 0 {
		return runDaemon(sel, opts, d, warn)
	}
	if opts.command == cmdPair {
		return runPair(sel, opts, d, stdout, warn)
	}
	if takesPid(opts.command) {
		return runCheckpoint(sel, opts, d, stdout, warn)
	}
	doc, code := probe(sel, opts, d, warn)
	if doc == nil {
		return code
	}
	out, err := render(doc, opts, d)
	if err == nil {
		err = deliver(opts, stdout, out)
	}
	if err != nil {
		warn(err.Error())
		return exitFailure
	}
	return code
}

// system is the node sel runs on: a sim preset's, or this host.
func (d deps) system(sel *opened) system {
	if sel.info.Simulated {
		return simSystem(sel.cfg)
	}
	return d.host()
}

// probe builds the document the command asks for and the exit code it means; the
// document is nil when there is nothing to write (no device).
func probe(sel *opened, opts options, d deps, warn func(string)) (*document, int) {
	sys := d.system(sel)
	doc, err := gather(sel, sys, opts.command, d.program(), d.now())
	if err != nil {
		warn(errText(err))
		if errors.Is(err, errNoDevice) {
			return nil, exitNoDevice
		}
		return nil, exitNoDriver
	}
	for _, e := range doc.Errors {
		warn(e)
	}
	for _, dv := range doc.Devices {
		for _, e := range dv.Errors {
			warn(fmt.Sprintf("device %d: %s", dv.Index, e))
		}
	}
	if sel.b != nil && opts.command != cmdReport {
		runChecks(sel.b, doc, checkOptions{childSpec: sel.childSpec, multicast: opts.multicast})
	}
	if opts.command == cmdCheck {
		doc.RDMA = readRDMA(sys, doc)
	}
	doc.NVLS = decideNVLS(doc)
	switch opts.command {
	case cmdEnv:
		doc.Settings = decideSettings(doc)
	case cmdReady:
		doc.Readiness = judgeReadiness(doc, opts.require)
	}
	switch {
	case sel.initErr != nil:
		warn("the CUDA driver did not initialize: " + oneLine(errText(sel.initErr)))
		return doc, exitNoDriver
	case doc.Readiness != nil && !doc.Readiness.Ready:
		return doc, exitNotReady
	case doc.Readiness != nil:
		return doc, exitOK
	case doc.Summary != nil && doc.Summary.Failed > 0:
		warn(fmt.Sprintf("%d check(s) failed", doc.Summary.Failed))
		return doc, exitCheckFailed
	}
	return doc, exitOK
}

// renderJSON is the document as indented JSON: the schema of docs/vmmprobe.md, version
// schemaVersion. Shell commands in remedies keep their & < > unescaped.
func renderJSON(doc *document) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(doc)
	return b.Bytes(), err
}

// render is the document in the format asked for.
func render(doc *document, opts options, d deps) ([]byte, error) {
	switch opts.format {
	case formatJSON:
		return renderJSON(doc)
	case formatLabels:
		return renderLabels(doc, opts.labelTTL, d.now(), opts.gfdClique), nil
	case formatPrometheus:
		return renderPrometheus(doc), nil
	case formatShell:
		return renderShell(doc), nil
	}
	if doc.Readiness != nil {
		return []byte(wrapTable(string(renderReadiness(doc)), tableWidth)), nil
	}
	return []byte(wrapTable(string(renderTable(doc)), tableWidth)), nil
}

// deliver writes out to --output-file, or to stdout.
func deliver(opts options, stdout io.Writer, out []byte) error {
	if opts.outputFile != "" {
		return writeOutput(opts.outputFile, out)
	}
	if _, err := stdout.Write(out); err != nil {
		return fmt.Errorf("standard output: %w", err)
	}
	return nil
}

// writeReport writes the report of pair or the checkpoint commands, v, as indented JSON
// with -o json, else its table wrapped for the terminal, and returns the exit code: a
// failure to write (with a warning), else whether the report is ok.
func writeReport(opts options, stdout io.Writer, v any, table string, ok bool, warn func(string)) int {
	out := []byte(wrapTable(table, tableWidth))
	var err error
	if opts.format == formatJSON {
		out, err = json.MarshalIndent(v, "", "  ")
		out = append(out, '\n')
	}
	if err == nil {
		err = deliver(opts, stdout, out)
	}
	switch {
	case err != nil:
		warn(err.Error())
		return exitFailure
	case !ok:
		return exitCheckFailed
	}
	return exitOK
}

// pairStep is one timed step of pair or a checkpoint command.
type pairStep struct {
	Step         string `json:"step"`
	Microseconds int64  `json:"us"`
}

// steps are the timed steps of pair or a checkpoint command, in order.
type steps []pairStep

// run runs f as the named step and records how long it took.
func (s *steps) run(name string, f func() error) error {
	t0 := time.Now()
	err := f()
	*s = append(*s, pairStep{name, time.Since(t0).Microseconds()})
	return err
}

// timed runs f as the named step of s and returns its result.
func timed[T any](s *steps, name string, f func() (T, error)) (T, error) {
	var v T
	err := s.run(name, func() (err error) {
		v, err = f()
		return err
	})
	return v, err
}

// String is the steps as the tables show them: "lock 1.2ms, checkpoint 3s".
func (s steps) String() string {
	var parts []string
	for _, st := range s {
		parts = append(parts, st.Step+" "+(time.Duration(st.Microseconds)*time.Microsecond).String())
	}
	return strings.Join(parts, ", ")
}

// verdictLines are the verdict of pair or a checkpoint command in its table: what, then
// "ok: diagnosis" or "FAILED" and why, with the error below.
func verdictLines(b *strings.Builder, what string, ok bool, failed, diagnosis, err string) {
	verdict := "ok: " + diagnosis
	if !ok {
		verdict = "FAILED" + failed + ": " + diagnosis
	}
	kvLine(b, 0, what, verdict)
	if err != "" {
		kvLine(b, 2, "error", oneLine(err))
	}
}
