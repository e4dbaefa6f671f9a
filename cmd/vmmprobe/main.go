// Command vmmprobe tells an operator what the CUDA driver's virtual memory management,
// shareable handles (POSIX file descriptors, fabric) and multicast can really do on this
// node, and with `vmmprobe check` proves it by doing each operation.
//
// See docs/vmmprobe.md for the output formats and the JSON schema, and --help for flags
// and exit codes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/sim"
)

// Exit codes, documented in --help, the README and docs/vmmprobe.md.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitNoDriver    = 3
	exitNoDevice    = 4
	exitCheckFailed = 5
)

// Output formats of -o.
const (
	formatTable  = "table"
	formatJSON   = "json"
	formatLabels = "labels"
)

// Commands.
const (
	cmdReport = "report"
	cmdCheck  = "check"
)

func main() {
	if code, ok := runChildIfRequested(backend.Opener{}); ok {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, backend.Opener{}))
}

const usageText = `Usage: vmmprobe [check] [flags]

vmmprobe reports what the CUDA driver's virtual memory management (VMM), shareable
handles and multicast support on this node, per device: the driver's attributes,
granularities, IMEX channel state (Linux), peer access and the driver symbols.

  vmmprobe          the report (default)
  vmmprobe check    also exercise each feature for real, per device: create, reserve,
                    map, set access, copy round trip, teardown; POSIX file descriptor
                    export and import in a child process; fabric handles (with an IMEX
                    diagnosis); compression; GPUDirect RDMA; host and host-NUMA memory;
                    peer mapping for every device pair. Each result is ok, unsupported,
                    failed or skipped, with the driver error and a remedy.

Backends: --backend=auto (the default) uses the real driver when it loads; when it does
not, the table output falls back to a simulated machine (sim preset %[1]q) with a notice
on stderr and SIMULATED at the top, while -o json and -o labels exit 3 instead.
--backend=sim always simulates (presets: %[2]s).

Exit codes:
  0  ok (the report was written; with check, no check failed)
  1  the output could not be written
  2  usage error
  3  no CUDA driver could be loaded (or it could not be initialized)
  4  no CUDA device
  5  a check failed (check only; the output is still written)

Flags:
`

// options are the parsed command line.
type options struct {
	command    string
	format     string
	outputFile string
	backend    backend.Choice
	multicast  bool
}

func run(args []string, stdout, stderr io.Writer, o backend.Opener) int {
	opts, code := parseArgs(args, stderr)
	if code >= 0 {
		return code
	}
	warn := func(msg string) { fmt.Fprintln(stderr, "vmmprobe:", msg) }

	sel, err := open(o, opts.backend, opts.format == formatTable)
	if err == nil && sel.initErr != nil {
		err = &openError{code: exitNoDriver, err: sel.initErr}
	}
	if err == nil && sel.info.Fallback != "" {
		warn(fmt.Sprintf("no CUDA driver (%s); showing the simulated %q preset instead", sel.info.Fallback, sel.info.Preset))
	}
	if err != nil {
		var oe *openError
		code := exitNoDriver
		if errors.As(err, &oe) {
			code = oe.code
		}
		switch code {
		case exitNoDevice:
			warn("no CUDA device: " + errText(err))
		case exitNoDriver:
			warn("no CUDA driver: " + errText(err))
		default:
			warn(errText(err))
		}
		return code
	}
	doc, err := gather(sel.b, sel.info, opts.command)
	if err != nil {
		warn(errText(err))
		if errors.Is(err, errNoDevice) {
			return exitNoDevice
		}
		return exitNoDriver
	}
	for _, e := range doc.Errors {
		warn(e)
	}
	for _, d := range doc.Devices {
		for _, e := range d.Errors {
			warn(fmt.Sprintf("device %d: %s", d.Index, e))
		}
	}
	if opts.command == cmdCheck {
		runChecks(sel.b, doc, checkOptions{childSpec: sel.childSpec, multicast: opts.multicast})
	}

	var out []byte
	switch opts.format {
	case formatJSON:
		out, err = renderJSON(doc)
	case formatLabels:
		out = renderLabels(doc)
	default:
		out = renderTable(doc)
	}
	if err != nil {
		warn(err.Error())
		return exitUsage
	}
	if opts.outputFile != "" {
		if err := writeOutput(opts.outputFile, out); err != nil {
			warn(err.Error())
			return exitFailure
		}
	} else if _, err := stdout.Write(out); err != nil {
		warn("standard output: " + err.Error())
		return exitFailure
	}
	if doc.Summary != nil && doc.Summary.Failed > 0 {
		warn(fmt.Sprintf("%d check(s) failed", doc.Summary.Failed))
		return exitCheckFailed
	}
	return exitOK
}

// parseArgs parses the command line; code is -1 to go on, or the exit code to return.
// Flags may come before or after the command.
func parseArgs(args []string, stderr io.Writer) (opts options, code int) {
	opts = options{command: cmdReport}
	fs := flag.NewFlagSet("vmmprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.format, "o", formatTable, "output `format`: table, json or labels")
	fs.StringVar(&opts.format, "output", formatTable, "output `format` (same as -o)")
	fs.StringVar(&opts.outputFile, "output-file", "", "write the output to `path` instead of stdout: a regular file is replaced atomically\n(through a temporary file and a rename), a device or pipe is written in place")
	opts.backend.Register(fs, backend.Auto, defaultPreset)
	fs.BoolVar(&opts.multicast, "unsafe-multicast", false, "check only: create a real multicast object (cuMulticastCreate) over the\n"+
		"multicast-capable devices. UNSAFE ON SHARED MACHINES: it takes NVSwitch multicast\n"+
		"resources other tenants may be using. Without it multicast is reported from the\n"+
		"device attributes and marked as not exercised.")
	fs.Usage = func() {
		fmt.Fprintf(stderr, usageText, defaultPreset, strings.Join(sim.Presets(), ", "))
		printFlags(stderr, fs)
	}
	usage := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "vmmprobe: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run vmmprobe --help for usage.")
		return opts, exitUsage
	}
	parse := func(a []string) int {
		if err := fs.Parse(a); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		return -1
	}
	if code := parse(args); code >= 0 {
		return opts, code
	}
	if rest := fs.Args(); len(rest) > 0 {
		switch rest[0] {
		case cmdCheck, cmdReport:
			opts.command = rest[0]
		case "help":
			fs.Usage()
			return opts, exitOK
		default:
			return usage("unknown command %q", rest[0])
		}
		if code := parse(rest[1:]); code >= 0 {
			return opts, code
		}
		if fs.NArg() > 0 {
			return usage("unexpected argument %q", fs.Arg(0))
		}
	}
	switch opts.format {
	case formatTable, formatJSON, formatLabels:
	default:
		return usage("unknown output format %q (table, json or labels)", opts.format)
	}
	if err := opts.backend.Check(); err != nil {
		return usage("%v", err)
	}
	if opts.multicast && opts.command != cmdCheck {
		return usage("--unsafe-multicast applies to vmmprobe check only")
	}
	return opts, -1
}

// printFlags lists the flags GNU style (--name), -o and --output as one.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "o" {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		name := "  --" + f.Name
		if f.Name == "output" {
			name, usage = "  -o, --output", "output format: table, json or labels"
		}
		if arg != "" {
			name += " " + arg
		}
		fmt.Fprintln(w, name)
		for _, line := range strings.Split(usage, "\n") {
			fmt.Fprintln(w, "        "+line)
		}
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, "        (default %s)\n", f.DefValue)
		}
	})
}
