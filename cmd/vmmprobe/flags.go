package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/sim"
)

// Commands.
const (
	cmdReport = "report"
	cmdCheck  = "check"
	cmdEnv    = "env"
	cmdReady  = "ready"
	cmdPair   = "pair"
)

// Output formats of -o.
const (
	formatTable      = "table"
	formatJSON       = "json"
	formatLabels     = "labels"
	formatPrometheus = "prometheus"
	formatShell      = "shell"
)

// formats are the formats each command writes, its default first.
var formats = map[string][]string{
	cmdReport: {formatTable, formatJSON, formatLabels, formatPrometheus},
	cmdCheck:  {formatTable, formatJSON, formatLabels, formatPrometheus},
	cmdEnv:    {formatShell, formatJSON},
	cmdReady:  {formatTable, formatJSON},
	cmdPair:   {formatTable, formatJSON},
}

// defaultOnceTTL is how long the labels of a single run stay valid (--label-ttl), and
// daemonTTLs how many refresh intervals those of the daemon do.
const (
	defaultOnceTTL = 24 * time.Hour
	daemonTTLs     = 3
)

// options are the parsed command line.
type options struct {
	command     string
	format      string
	outputFile  string
	backend     backend.Choice
	multicast   bool
	interval    time.Duration
	labelTTL    time.Duration
	require     []string
	showVersion bool
	gfdClique   bool
	pair        pairOptions
}

const usageText = `Usage: vmmprobe [report|check|env|ready|pair] [flags]

vmmprobe says what the CUDA driver's virtual memory management (VMM), shareable handles
(POSIX file descriptors, fabric) and multicast can really do on this node, and why not:
the node's NVLink fabric (NVML, NVSwitches, Fabric Manager, IMEX daemon and channels) is
part of the report, each part with a remedy when it is wrong.

  vmmprobe          the report (default): attributes, granularities, the fabric picture,
                    IMEX channels, peer access, driver symbols, the NVLS verdict
  vmmprobe check    also exercise each feature for real, per device: create, reserve,
                    map, set access, copy, teardown; POSIX file descriptor and fabric
                    handle export, and import in a child process (through vmm/ipc);
                    compression; GPUDirect RDMA; host and host-NUMA memory; peer mapping
                    for every device pair. Each result is ok, unsupported, failed or
                    skipped, with the driver error and a remedy.
  vmmprobe env      check, then print the settings a job on this node should use
                    (NCCL_CUMEM_ENABLE, NCCL_NVLS_ENABLE, NCCL_MNNVL_ENABLE,
                    VMMPROBE_HANDLE_TYPE) as shell exports, each with its reason
  vmmprobe ready    check, then judge the requirements of --require: exit 0 when every
                    one is met, 6 when one is not (for startup or readiness probes, CI)
  vmmprobe pair     check that fabric memory one process exports another can import, on
                    this node or another: --listen ADDR on the exporting side, --connect
                    ADDR on the importing one, both holding the secret of --secret-file
                    (or $VMMPROBE_PAIR_SECRET); exit 0 when the import was verified both
                    ways, 5 when not, with the cause named

Multicast objects are created only with --unsafe-multicast (check, env, ready); without
it, NVLS is judged from NVML's fabric state and the attributes, and said not exercised.

Backends: --backend=auto (the default) uses the real driver when it loads; when it does
not, the table output of report and check falls back to a simulated machine (sim preset
%[1]q) with a notice on stderr and SIMULATED at the top; every other output exits 3.
--backend=sim always simulates (presets: %[2]s).

Exit codes:
  0  ok (the output was written; check and env: no check failed; ready: ready)
  1  a runtime failure: the output could not be written (to the file, or to stdout)
  2  usage error
  3  no CUDA driver could be loaded, or it did not initialize (cuInit failed: the
     report is still written, with the fabric picture that says why)
  4  no CUDA device
  5  check, env: a check failed (the output is still written)
  6  ready: a requirement is not met (the output is still written)
  (pair: 5 when the import was not verified)

Flags:
`

// parseArgs parses the command line; code is -1 to go on, or the exit code to return.
// Flags may come before or after the command. Help goes to stdout; every usage error has
// one shape on stderr: "vmmprobe: WHAT", then where to read more.
func parseArgs(args []string, stdout, stderr io.Writer) (opts options, code int) {
	opts = options{command: cmdReport}
	fs := flag.NewFlagSet("vmmprobe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var require string
	fs.StringVar(&opts.format, "o", "", "")
	fs.StringVar(&opts.format, "output", "", "output `format`: table, json, labels or prometheus (report, check); shell or json (env); table or json (ready)")
	fs.StringVar(&opts.outputFile, "output-file", "", "write the output to `path` instead of stdout: a regular file is replaced atomically\n"+
		"(through a temporary file and a rename), a device or pipe is written in place")
	opts.backend.Register(fs, backend.Auto, defaultPreset)
	fs.BoolVar(&opts.multicast, "unsafe-multicast", false, "check, env, ready: create a real multicast object (cuMulticastCreate) over the\n"+
		"multicast-capable devices. UNSAFE ON SHARED MACHINES: it takes NVSwitch multicast\n"+
		"resources other tenants may be using. Without it multicast is judged from NVML's\n"+
		"fabric state and the device attributes and marked as not exercised.")
	fs.DurationVar(&opts.interval, "interval", 0, "report, check: run as a daemon, rewriting --output-file every `duration` (5m, say)\n"+
		"until SIGTERM or SIGINT, then removing it")
	fs.DurationVar(&opts.labelTTL, "label-ttl", 0, "-o labels: the `duration` after which node-feature-discovery ignores the labels\n"+
		"(# +expiry-time); default 24h, or 3 intervals with --interval; 0s: no expiry")
	fs.StringVar(&require, "require", defaultRequire, "ready: the comma-separated `requirements` to meet: "+strings.Join(requirementNames(), ", "))
	fs.BoolVar(&opts.showVersion, "version", false, "print vmmprobe's version and exit")
	fs.BoolVar(&opts.gfdClique, "label-nvidia-clique", false, "-o labels: also write nvidia.com/gpu.clique (the same value as cuvmm.io/gpu.clique),\n"+
		"for nodes where neither GPU feature discovery nor the NVIDIA DRA driver sets it")
	opts.pair.register(fs)
	usage := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "vmmprobe: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'vmmprobe --help' for usage.")
		return opts, exitUsage
	}
	help := func() (options, int) {
		fmt.Fprintf(stdout, usageText, defaultPreset, strings.Join(sim.Presets(), ", "))
		printFlags(stdout, fs)
		return opts, exitOK
	}
	parse := func(a []string) (options, int) {
		if err := fs.Parse(a); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return help()
			}
			return usage("%s", err.Error())
		}
		return opts, -1
	}
	if _, code := parse(args); code >= 0 {
		return opts, code
	}
	if rest := fs.Args(); len(rest) > 0 {
		switch rest[0] {
		case cmdCheck, cmdReport, cmdEnv, cmdReady, cmdPair:
			opts.command = rest[0]
		case "help":
			return help()
		case "version":
			opts.showVersion = true
		default:
			return usage("unknown command %q (report, check, env, ready, pair)", rest[0])
		}
		if _, code := parse(rest[1:]); code >= 0 {
			return opts, code
		}
		if fs.NArg() > 0 {
			return usage("unexpected argument %q", fs.Arg(0))
		}
	}
	if opts.showVersion {
		return opts, -1
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return validateOptions(opts, set, require, usage)
}

// validateOptions checks the flags against the command and each other.
func validateOptions(opts options, set map[string]bool, require string, usage func(string, ...any) (options, int)) (options, int) {
	ok := formats[opts.command]
	if opts.format == "" {
		opts.format = ok[0]
	}
	if !contains(ok, opts.format) {
		return usage("-o %q: %s writes %s", opts.format, opts.command, strings.Join(ok, ", "))
	}
	if err := opts.backend.Check(); err != nil {
		return usage("%v", err)
	}
	if opts.multicast && opts.command == cmdReport {
		return usage("--unsafe-multicast applies to check, env and ready, not report")
	}
	if set["require"] && opts.command != cmdReady {
		return usage("--require applies to ready only")
	}
	opts.require = nil
	for _, r := range strings.Split(require, ",") {
		r = strings.TrimSpace(r)
		if _, known := requirements[r]; !known {
			return usage("--require %q: unknown requirement %q (known: %s)", require, r, strings.Join(requirementNames(), ", "))
		}
		if !contains(opts.require, r) {
			opts.require = append(opts.require, r)
		}
	}
	switch {
	case opts.interval < 0:
		return usage("--interval %v: must be positive", opts.interval)
	case opts.interval > 0 && opts.command != cmdReport && opts.command != cmdCheck:
		return usage("--interval applies to report and check, not %s", opts.command)
	case opts.interval > 0 && opts.outputFile == "":
		return usage("--interval needs --output-file: the daemon keeps a file up to date")
	case opts.interval > 0 && opts.interval < time.Second:
		return usage("--interval %v: at least 1s", opts.interval)
	}
	if set["label-nvidia-clique"] && opts.format != formatLabels {
		return usage("--label-nvidia-clique applies to -o labels")
	}
	if err := opts.pair.check(opts.command, set); err != nil {
		return usage("%v", err)
	}
	if set["label-ttl"] && opts.format != formatLabels {
		return usage("--label-ttl applies to -o labels")
	}
	switch {
	case opts.labelTTL < 0:
		return usage("--label-ttl %v: must not be negative", opts.labelTTL)
	case !set["label-ttl"] && opts.interval > 0:
		opts.labelTTL = daemonTTLs * opts.interval
	case !set["label-ttl"]:
		opts.labelTTL = defaultOnceTTL
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
			name = "  -o, --output"
		}
		if arg != "" {
			name += " " + arg
		}
		fmt.Fprintln(w, name)
		for _, line := range strings.Split(usage, "\n") {
			fmt.Fprintln(w, "        "+line)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" {
			fmt.Fprintf(w, "        (default %s)\n", f.DefValue)
		}
	})
}
