package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/internal/backend"
)

// Commands.
const (
	cmdReport = "report"
	cmdCheck  = "check"
	cmdEnv    = "env"
	cmdReady  = "ready"
	cmdPair   = "pair"
	// Checkpoint and restore of another process, by pid (checkpoint.go).
	cmdCheckpointCheck = "checkpoint-check"
	cmdCheckpoint      = "checkpoint"
	cmdRestore         = "restore"
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
	cmdReport:          {formatTable, formatJSON, formatLabels, formatPrometheus},
	cmdCheck:           {formatTable, formatJSON, formatLabels, formatPrometheus},
	cmdEnv:             {formatShell, formatJSON},
	cmdReady:           {formatTable, formatJSON},
	cmdPair:            {formatTable, formatJSON},
	cmdCheckpointCheck: {formatTable, formatJSON},
	cmdCheckpoint:      {formatTable, formatJSON},
	cmdRestore:         {formatTable, formatJSON},
}

// defaultOnceTTL is how long the labels of a single run stay valid (--label-ttl), and
// daemonTTLs how many refresh intervals those of the daemon do.
const (
	defaultOnceTTL = 24 * time.Hour
	daemonTTLs     = 3
	minLabelTTL    = time.Minute
	maxInterval    = 24 * time.Hour
	maxLabelTTL    = 366 * 24 * time.Hour
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
	quiet       bool
	gfdClique   bool
	pair        pairOptions
	pid         int // checkpoint-check, checkpoint, restore
	toGPU       string
	force       bool // restore despite the free-memory check
}

// parseArgs parses the command line; code is -1 to go on, or the exit code to return.
// Flags may come before or after the command. Help goes to stdout; every usage error has
// one shape on stderr: "vmmprobe: WHAT", then where to read more.
func parseArgs(args []string, stdout, stderr io.Writer) (opts options, code int) {
	opts = options{command: cmdReport}
	fs := flag.NewFlagSet("vmmprobe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var require string
	fs.StringVar(&opts.format, "o", "", "")
	fs.StringVar(&opts.format, "output", "", "output `format`: table, json, labels or prometheus (report, check);\n"+
		"shell or json (env); table or json (ready, pair)")
	fs.StringVar(&opts.outputFile, "output-file", "", "write the output to `path` instead of stdout: a regular file is replaced\n"+
		"atomically (through a temporary file and a rename), a device or pipe in place")
	opts.backend.Register(fs, backend.Auto, defaultPreset)
	fs.BoolVar(&opts.multicast, "unsafe-multicast", false, "create a real multicast object (cuMulticastCreate) over the multicast-capable\n"+
		"devices. UNSAFE ON SHARED MACHINES: it takes NVSwitch multicast resources other\n"+
		"tenants may be using. Without it multicast is judged from NVML's fabric state and\n"+
		"the device attributes and marked as not exercised.")
	fs.DurationVar(&opts.interval, "interval", 0, "run as a daemon, rewriting --output-file every `duration` (5m, say; 1s to 24h)\n"+
		"until SIGTERM or SIGINT, then removing it; one log line at start, per refresh and at exit")
	fs.BoolVar(&opts.quiet, "quiet", false, "with --interval: no log lines, only warnings and errors")
	fs.DurationVar(&opts.labelTTL, "label-ttl", 0, "-o labels: the `duration` after which node-feature-discovery (v0.14 or later)\n"+
		"ignores the labels (# +expiry-time); default 24h, or 3 intervals with --interval;\n"+
		"0s: no expiry; otherwise at least 1m and the interval, and at most 8784h")
	fs.StringVar(&require, "require", defaultRequire, "the comma-separated `requirements` to meet: "+strings.Join(requirementNames(), ", "))
	fs.BoolVar(&opts.showVersion, "version", false, "print vmmprobe's version and exit")
	fs.BoolVar(&opts.gfdClique, "label-nvidia-clique", false, "-o labels: also write nvidia.com/gpu.clique (the value of cuvmm.io/gpu.clique),\n"+
		"for nodes where neither GPU feature discovery nor the NVIDIA DRA driver sets it")
	opts.pair.register(fs)
	fs.StringVar(&opts.toGPU, "to-gpu", "", "restore: bring the process back on other GPUs, `OLD=NEW,...` (GPU UUIDs as\n"+
		"nvidia-smi -L prints them); the host's GPUs not named are paired with the rest in\n"+
		"order when the driver wants every GPU paired")
	fs.BoolVar(&opts.force, "force", false, "restore: go on although the GPUs may lack the memory the process held")
	usage := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "vmmprobe: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'vmmprobe --help' for usage.")
		return opts, exitUsage
	}
	explicit := "" // the command named on the command line
	help := func(command string) (options, int) {
		writeHelp(stdout, fs, command)
		return opts, exitOK
	}
	parse := func(a []string) (options, int) {
		if err := fs.Parse(shortOutput(a)); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return help(explicit)
			}
			return usage("%s", flagError(err, fs))
		}
		return opts, -1
	}
	if _, code := parse(args); code >= 0 {
		return opts, code
	}
	if rest := fs.Args(); len(rest) > 0 {
		switch rest[0] {
		case cmdCheck, cmdReport, cmdEnv, cmdReady, cmdPair, cmdCheckpointCheck, cmdCheckpoint, cmdRestore:
			opts.command, explicit = rest[0], rest[0]
		case "help":
			if len(rest) > 1 && isCommand(rest[1]) {
				return help(rest[1])
			}
			return help("")
		case "version":
			opts.showVersion = true
		case cmdCompletion:
			if len(rest) != 2 {
				return usage("completion needs one shell: bash, zsh or fish")
			}
			if err := writeCompletion(stdout, rest[1], fs); err != nil {
				return usage("%v", err)
			}
			return opts, exitOK
		default:
			return usage("unknown command %q%s (%s)", rest[0], didYouMean(rest[0], commandNames()), strings.Join(commandNames(), ", "))
		}
		if _, code := parse(rest[1:]); code >= 0 {
			return opts, code
		}
		if takesPid(opts.command) {
			if fs.NArg() == 0 {
				return usage("%s needs the process id: vmmprobe %s PID", opts.command, opts.command)
			}
			pid, err := strconv.ParseInt(fs.Arg(0), 10, 32) // the driver's pid is an int
			if err != nil || pid <= 0 {
				return usage("%s %q: not a process id", opts.command, fs.Arg(0))
			}
			opts.pid = int(pid)
			if _, code := parse(fs.Args()[1:]); code >= 0 { // flags after the pid
				return opts, code
			}
		}
		if fs.NArg() > 0 {
			return usage("unexpected argument %q", fs.Arg(0))
		}
	}
	if opts.showVersion {
		return opts, -1
	}
	set := map[string]bool{}
	var empty string
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if f.Value.String() == "" && empty == "" {
			empty = f.Name
		}
	})
	if empty != "" {
		return usage("--%s: empty value", empty)
	}
	for _, f := range slices.Sorted(maps.Keys(set)) { // the first flag that does not apply
		if !appliesTo(f, opts.command) {
			return usage("--%s applies to %s", f, joinCommands(flagCommands[f]))
		}
	}
	return validateOptions(opts, set, require, usage)
}

// validateOptions checks the flags against the command and each other.
func validateOptions(opts options, set map[string]bool, require string, usage func(string, ...any) (options, int)) (options, int) {
	ok := formats[opts.command]
	if opts.format == "" {
		opts.format = ok[0]
	}
	if !slices.Contains(ok, opts.format) {
		return usage("-o %q: %s writes %s", opts.format, opts.command, strings.Join(ok, ", "))
	}
	if err := opts.backend.Check(); err != nil {
		return usage("%v", err)
	}
	opts.require = nil
	for _, r := range strings.Split(require, ",") {
		r = strings.TrimSpace(r)
		if _, known := requirements[r]; !known {
			return usage("--require %q: unknown requirement %q (known: %s)", require, r, strings.Join(requirementNames(), ", "))
		}
		if !slices.Contains(opts.require, r) {
			opts.require = append(opts.require, r)
		}
	}
	switch {
	case opts.interval < 0:
		return usage("--interval %v: must be positive", opts.interval)
	case opts.interval > 0 && opts.outputFile == "":
		return usage("--interval needs --output-file: the daemon keeps a file up to date")
	case opts.interval > 0 && opts.interval < time.Second:
		return usage("--interval %v: at least 1s", opts.interval)
	case opts.interval > maxInterval:
		return usage("--interval %v: at most %v", opts.interval, maxInterval)
	}
	if set["label-nvidia-clique"] && opts.format != formatLabels {
		return usage("--label-nvidia-clique applies to -o labels")
	}
	if set["quiet"] && opts.interval == 0 {
		return usage("--quiet applies to the daemon (--interval)")
	}
	if err := opts.pair.check(opts.command); err != nil {
		return usage("%v", err)
	}
	if _, err := parseToGPU(opts.toGPU); err != nil {
		return usage("--to-gpu %q: %v", opts.toGPU, err)
	}
	if set["label-ttl"] && opts.format != formatLabels {
		return usage("--label-ttl applies to -o labels")
	}
	switch {
	case opts.labelTTL < 0:
		return usage("--label-ttl %v: must not be negative", opts.labelTTL)
	case opts.labelTTL > maxLabelTTL:
		return usage("--label-ttl %v: at most %v (or 0s, no expiry)", opts.labelTTL, maxLabelTTL)
	case set["label-ttl"] && opts.labelTTL > 0 && opts.labelTTL < minLabelTTL:
		return usage("--label-ttl %v: at least %v (or 0s, no expiry): the labels would expire before node-feature-discovery reads them", opts.labelTTL, minLabelTTL)
	case set["label-ttl"] && opts.labelTTL > 0 && opts.labelTTL < opts.interval:
		return usage("--label-ttl %v: at least the interval (%v), or the labels expire between refreshes", opts.labelTTL, opts.interval)
	case !set["label-ttl"] && opts.interval > 0:
		opts.labelTTL = daemonTTLs * opts.interval
	case !set["label-ttl"]:
		opts.labelTTL = defaultOnceTTL
	}
	return opts, -1
}
