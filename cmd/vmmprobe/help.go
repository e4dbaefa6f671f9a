package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cuvmm/cuvmm/sim"
)

const cmdCompletion = "completion"

// commands are vmmprobe's commands in the order help lists them, each with what it does.
var commands = []struct{ name, help string }{
	{cmdReport, `the report (the default command): attributes, granularities, the fabric
picture and the node's NVLink clique, IMEX channels, peer access, driver symbols, the NVLS
verdict`},
	{cmdCheck, `the report, then exercise each feature for real, per device: create, reserve,
map, set access, copy, teardown; POSIX file descriptor and fabric handle export, and import
in a child process (through vmm/ipc); compression; GPUDirect RDMA; dma-buf; host and
host-NUMA memory; peer mapping for every device pair. Each result is ok, unsupported,
failed or skipped, with the driver error and a remedy`},
	{cmdEnv, `check, then print the settings a job on this node should use
(NCCL_CUMEM_ENABLE, NCCL_NVLS_ENABLE, NCCL_MNNVL_ENABLE, VMMPROBE_HANDLE_TYPE) as shell
exports, each with its reason`},
	{cmdReady, `check, then judge the requirements of --require: exit 0 when every one is met,
6 when one is not (for startup or readiness probes, CI)`},
	{cmdPair, `check that fabric memory one process exports another can import, on this node
or another: --listen ADDR on the exporting side, --connect ADDR on the importing one, both
holding the secret of --secret-file (or $VMMPROBE_PAIR_SECRET); exit 0 when the import was
verified both ways, 5 when not, with the cause named`},
	{cmdCheckpointCheck, `PID: what would stop the driver from checkpointing process PID, as far as /proc
shows: whether it runs, whether it is a CUDA process and which GPUs it has open, whether it
is stopped, whether it holds dma-bufs (memory shared with a NIC or another process); each
hazard with its remedy. Exit 0 when none is found, 5 when one is`},
	{cmdCheckpoint, `PID: lock process PID (waiting at most --timeout for its CUDA calls) and checkpoint
its GPU memory, VMM memory included, into host memory, releasing its GPUs; refused when
checkpoint-check finds a hazard. Each step's time is reported`},
	{cmdRestore, `PID: restore checkpointed process PID's GPU memory onto its GPUs (or others: --to-gpu) and unlock it`},
	{cmdCompletion, `print a completion script for bash, zsh or fish
(vmmprobe completion bash > /etc/bash_completion.d/vmmprobe)`},
}

func commandNames() []string {
	n := make([]string, len(commands))
	for i, c := range commands {
		n[i] = c.name
	}
	return n
}

func isCommand(s string) bool { return slices.Contains(commandNames(), s) }

// flagCommands are the commands each flag applies to; a flag not listed applies to all.
var flagCommands = map[string][]string{
	"unsafe-multicast":    {cmdCheck, cmdEnv, cmdReady},
	"interval":            {cmdReport, cmdCheck},
	"quiet":               {cmdReport, cmdCheck},
	"label-ttl":           {cmdReport, cmdCheck},
	"label-nvidia-clique": {cmdReport, cmdCheck},
	"require":             {cmdReady},
	"listen":              {cmdPair},
	"connect":             {cmdPair},
	"secret-file":         {cmdPair},
	"timeout":             {cmdPair, cmdCheckpoint},
	"device":              {cmdPair},
	"to-gpu":              {cmdRestore},
	"force":               {cmdRestore},
}

func appliesTo(flagName, command string) bool {
	cmds, ok := flagCommands[flagName]
	return !ok || slices.Contains(cmds, command)
}

// joinCommands writes commands as a sentence: "ready only", "report and check",
// "check, env and ready".
func joinCommands(c []string) string {
	if len(c) == 1 {
		return c[0] + " only"
	}
	return strings.Join(c[:len(c)-1], ", ") + " and " + c[len(c)-1]
}

// writeHelp writes the help of one command, or with command "" the whole help.
func writeHelp(w io.Writer, fs *flag.FlagSet, command string) {
	if command == "" {
		fmt.Fprint(w, `Usage: vmmprobe [command] [flags]

vmmprobe says what the CUDA driver's virtual memory management (VMM), shareable handles
(POSIX file descriptors, fabric) and multicast can really do on this node, and why not: the
node's NVLink fabric (NVML, NVSwitches, Fabric Manager, IMEX daemon and channels) is part of
the report, each part with a remedy when it is wrong.

Commands:
`)
		for _, c := range commands {
			fmt.Fprintf(w, "  %-12s %s\n", c.name, wrapWords(c.help, tableWidth, 15))
		}
		fmt.Fprintf(w, `
'vmmprobe help COMMAND' or 'vmmprobe COMMAND --help' shows one command's help and flags.

Multicast objects are created only with --unsafe-multicast (check, env, ready); without it,
NVLS is judged from NVML's fabric state and the attributes, and said not exercised.

%s
`, wrapWords(fmt.Sprintf("Backends: --backend=auto (the default) uses the real driver when it loads; when it does "+
			"not, the table output of report and check falls back to a simulated machine (sim preset %q) with a notice on "+
			"stderr and SIMULATED at the top; every other output exits 3. --backend=sim always simulates (presets: %s).",
			defaultPreset, strings.Join(sim.Presets(), ", ")), tableWidth, 0))
	} else {
		for _, c := range commands {
			if c.name == command {
				fmt.Fprintf(w, "Usage: vmmprobe %s [flags]\n\n%s.\n", command, wrapWords(c.help, tableWidth, 0))
			}
		}
	}
	fmt.Fprint(w, `
Exit codes:
  0  ok (the output was written; check and env: no check failed; ready: ready)
  1  a runtime failure: the output could not be written (to the file, or to stdout)
  2  usage error
  3  no CUDA driver could be loaded, or it did not initialize (cuInit failed: the report
     is still written, with the fabric picture that says why)
  4  no CUDA device
  5  check, env: a check failed (the output is still written); pair: not imported
  6  ready: a requirement is not met (the output is still written)

Flags:
`)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "o" || (command != "" && !appliesTo(f.Name, command)) {
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
		if cmds, ok := flagCommands[f.Name]; ok && command == "" {
			name += "  (" + strings.Join(cmds, ", ") + ")"
		}
		fmt.Fprintln(w, name+"\n        "+strings.ReplaceAll(usage, "\n", "\n        "))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" && f.DefValue != "0" {
			fmt.Fprintf(w, "        (default %s)\n", f.DefValue)
		}
	})
}

// shortOutput turns kubectl's -ojson into -o json.
func shortOutput(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if strings.HasPrefix(a, "-o") && len(a) > 2 && a[2] != '=' {
			out = append(out, "-o", a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// flagError rewrites the flag package's error in GNU style, with a suggestion for a
// mistyped flag.
func flagError(err error, fs *flag.FlagSet) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return "unknown flag --" + name + didYouMean(name, names)
	}
	return msg
}

// didYouMean suggests the known word nearest to s, when one is near enough to be a typo.
func didYouMean(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if len(k) < 2 {
			continue
		}
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > max(1, len(s)/3) {
		return ""
	}
	if isCommand(best) {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return fmt.Sprintf(" (did you mean --%s?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// writeCompletion writes the completion script of shell: commands, flags, and the values
// of -o, --backend and --preset.
func writeCompletion(w io.Writer, shell string, fs *flag.FlagSet) error {
	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "o" {
			flags = append(flags, "--"+f.Name)
		}
	})
	cmds := strings.Join(commandNames(), " ")
	presets := strings.Join(sim.Presets(), " ")
	formats := "table json labels prometheus shell"
	switch shell {
	case "bash":
		fmt.Fprintf(w, `# bash completion for vmmprobe: source it, or put it in /etc/bash_completion.d/vmmprobe
_vmmprobe() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case $prev in
    -o|--output) COMPREPLY=($(compgen -W "%s" -- "$cur")); return ;;
    --backend) COMPREPLY=($(compgen -W "auto cuda sim" -- "$cur")); return ;;
    --preset) COMPREPLY=($(compgen -W "%s" -- "$cur")); return ;;
    --output-file|--secret-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  COMPREPLY=($(compgen -W "%s %s" -- "$cur"))
}
complete -F _vmmprobe vmmprobe
`, formats, presets, cmds, strings.Join(flags, " "))
	case "zsh":
		fmt.Fprintf(w, `#compdef vmmprobe
# zsh completion for vmmprobe: put it in a directory of $fpath as _vmmprobe
_vmmprobe() {
  case $words[CURRENT-1] in
    -o|--output) compadd %s; return ;;
    --backend) compadd auto cuda sim; return ;;
    --preset) compadd %s; return ;;
    --output-file|--secret-file) _files; return ;;
  esac
  compadd %s %s
}
compdef _vmmprobe vmmprobe
`, formats, presets, cmds, strings.Join(flags, " "))
	case "fish":
		fmt.Fprintf(w, "# fish completion for vmmprobe: put it in ~/.config/fish/completions/vmmprobe.fish\n")
		fmt.Fprintf(w, "complete -c vmmprobe -f -n __fish_use_subcommand -a '%s'\n", cmds)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "o" {
				return
			}
			_, usage := flag.UnquoteUsage(f)
			first, _, _ := strings.Cut(usage, "\n")
			line := fmt.Sprintf("complete -c vmmprobe -l %s -d '%s'", f.Name, strings.ReplaceAll(first, "'", `\'`))
			switch f.Name {
			case "output":
				line += " -s o -x -a '" + formats + "'"
			case "backend":
				line += " -x -a 'auto cuda sim'"
			case "preset":
				line += " -x -a '" + presets + "'"
			case "output-file", "secret-file":
				line += " -r -F"
			}
			fmt.Fprintln(w, line)
		})
	default:
		return errors.New("completion " + shell + ": want bash, zsh or fish")
	}
	return nil
}
