// Command grow measures the growth of one device buffer to a total size in fixed steps, five
// ways: the growable buffer of package vmm/buffer (geometric and exact policies) and Go ports,
// through packages cu and vmm, of the four strategies of bench/c/grow.c (VMM with all address
// space reserved up front, VMM doubling its address space, cuMemAlloc+copy doubling,
// cuMemAlloc+copy exact). For each it records the growth time, the cumulative time after
// every step, the driver calls and the peak device memory (cuMemGetInfo sampled around each
// step, outside the timing, minus what was in use before the strategy started).
//
// With -capacity it also grows the buffer (exact policy) and cuMemAlloc doubling in 1 GiB
// steps until the driver runs out of memory, and reports how far each got as a fraction of
// device memory.
//
//	grow -runs 16GiB/64MiB,4GiB/2MiB -capacity -csv growth.csv -summary summary.csv
//	grow --backend=sim -total 1GiB -step 64MiB     # a smoke test without a GPU
//
// The per-step series go to -csv (for bench/plot), one row per strategy to -summary, and a
// table to stdout. On sim the cuMemAlloc strategies are skipped: they need a CUDA context.
//
// Exit status: 0 when every strategy ran (or was skipped), 1 when one failed or the device
// could not be opened, 2 on a usage error, 3 when no CUDA driver could be loaded.
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/loader"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNoDriver = 3

	// maxSteps bounds a run so that a typo (1TiB/2MiB) cannot keep the machine busy for
	// hours or hold millions of handles.
	maxSteps = 1 << 20
)

// runSpec is one growth run: a total reached in steps of step bytes.
type runSpec struct {
	total, step uint64
}

func (r runSpec) label() string { return units.Size(r.total) + "/" + units.Size(r.step) }

func (r runSpec) steps() int { return int(r.total / r.step) }

type config struct {
	backend    string
	device     int
	sim        simOptions
	runs       []runSpec
	strategies []strategy
	reserve    uint64 // with reserveSet; otherwise the run's total
	reserveSet bool
	meminfo    bool
	warmup     bool
	capacity   bool
	capStep    uint64
	csvPath    string
	sumPath    string
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var fe flagError
	if errors.As(err, &fe) {
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "grow: %v\n", err)
		return exitUsage
	}
	d, err := openDevice(cfg.backend, cfg.device, cfg.sim)
	if err != nil {
		fmt.Fprintf(stderr, "grow: %v\n", err)
		var ue usageError
		switch {
		case errors.As(err, &ue):
			return exitUsage
		case errors.Is(err, loader.ErrNoDriver):
			return exitNoDriver
		}
		return exitFailed
	}
	for _, r := range cfg.runs {
		if r.step%d.gran != 0 {
			fmt.Fprintf(stderr, "grow: run %s: the step must be a multiple of the allocation granularity, %s\n", r.label(), units.Size(d.gran))
			return exitUsage
		}
	}
	if cfg.capacity && cfg.capStep%d.gran != 0 {
		fmt.Fprintf(stderr, "grow: -capacity-step %s: must be a multiple of the allocation granularity, %s\n", units.Size(cfg.capStep), units.Size(d.gran))
		return exitUsage
	}
	// Open the output files before spending minutes of GPU time.
	var csvFile, sumFile *os.File
	for _, o := range []struct {
		path string
		f    **os.File
	}{{cfg.csvPath, &csvFile}, {cfg.sumPath, &sumFile}} {
		if o.path == "" {
			continue
		}
		f, err := os.Create(o.path)
		if err != nil {
			fmt.Fprintf(stderr, "grow: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		*o.f = f
	}

	if cfg.warmup {
		if err := d.warmUp(); err != nil {
			fmt.Fprintf(stderr, "grow: warm-up: %v\n", err)
			return exitFailed
		}
	}
	fmt.Fprintf(stdout, "%s, allocation granularity %s\n", d.desc, units.Size(d.gran))
	var results []*result
	failed := false
	for _, r := range cfg.runs {
		fmt.Fprintf(stdout, "\ngrowth %s (%d steps)\n", r.label(), r.steps())
		var rs []*result
		for _, st := range cfg.strategies {
			res := runStrategy(d, st, r, cfg, false)
			if res.err != nil {
				failed = true
				fmt.Fprintf(stderr, "grow: %s %s: %v\n", r.label(), st.name, res.err)
			}
			rs = append(rs, res)
		}
		printRun(stdout, rs)
		results = append(results, rs...)
	}
	if cfg.capacity {
		rs, err := runCapacity(d, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "grow: capacity: %v\n", err)
			failed = true
		}
		for _, res := range rs {
			if res.err != nil {
				failed = true
				fmt.Fprintf(stderr, "grow: capacity %s: %v\n", res.strategy, res.err)
			}
		}
		printCapacity(stdout, rs)
		results = append(results, rs...)
	}

	if csvFile != nil {
		if err := writeSeries(csvFile, results); err != nil {
			fmt.Fprintf(stderr, "grow: %s: %v\n", cfg.csvPath, err)
			failed = true
		}
	}
	if sumFile != nil {
		if err := writeSummary(sumFile, results); err != nil {
			fmt.Fprintf(stderr, "grow: %s: %v\n", cfg.sumPath, err)
			failed = true
		}
	}
	if failed {
		return exitFailed
	}
	return exitOK
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("grow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var choice backend.Choice
	choice.Register(fs, backend.CUDA, "h100") // on sim the cuMemAlloc strategies are skipped
	device := fs.Int("device", 0, "device `ordinal`")
	simMem := fs.String("sim-mem", "", "sim: the device memory (`size`; default the preset's)")
	refuse := fs.Bool("sim-refuse-hints", false, "sim: refuse every fixed-address hint (vmm_doubling then remaps every time)")
	total := fs.String("total", "16GiB", "grow to this `size`")
	step := fs.String("step", "64MiB", "in steps of this `size` (a multiple of the allocation granularity)")
	runs := fs.String("runs", "", "several runs, `TOTAL/STEP,...` (e.g. 16GiB/64MiB,4GiB/2MiB); overrides -total and -step; empty with -capacity: capacity only")
	strats := fs.String("strategies", "all", "comma-separated `list` of strategies to run ("+strategyNames()+")")
	reserve := fs.String("reserve", "total", "address space the growable buffer reserves ahead: total (the run's total) or a `size` (0: the buffer's default)")
	meminfo := fs.Bool("meminfo", true, "sample cuMemGetInfo around each step (outside the timing) for the peak device memory")
	warmup := fs.Bool("warmup", true, "make each driver call once before measuring, so the first strategy does not pay first-use costs (grow.c does not)")
	capacity := fs.Bool("capacity", false, "also grow until out of memory: buffer (exact) and cuMemAlloc doubling")
	capStep := fs.String("capacity-step", "1GiB", "step `size` of the capacity test")
	csvPath := fs.String("csv", "", "write the per-step series to this CSV `file` (input of bench/plot)")
	sumPath := fs.String("summary", "", "write one row per run and strategy to this CSV `file`")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: grow [flags]\n\nGrows one device buffer to a total size in steps, six ways, and reports time, driver calls and peak device memory.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, flagError{err} // the flag package has printed it, and the usage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (every setting is a flag; -h lists them)", fs.Args())
	}
	if err := choice.Check(); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg := &config{backend: choice.Kind, device: *device, meminfo: *meminfo, warmup: *warmup, capacity: *capacity,
		csvPath: *csvPath, sumPath: *sumPath}
	cfg.sim = simOptions{preset: choice.Preset, refuseHints: *refuse}
	var err error
	if *simMem != "" {
		if cfg.sim.mem, err = parseSize(*simMem); err != nil {
			return nil, fmt.Errorf("-sim-mem: %w", err)
		}
		if cfg.sim.mem == 0 {
			return nil, errors.New("-sim-mem: must be more than 0")
		}
	}
	if set["runs"] {
		if set["total"] || set["step"] {
			return nil, errors.New("-runs and -total/-step: give one or the other")
		}
		if cfg.runs, err = parseRuns(*runs); err != nil {
			return nil, fmt.Errorf("-runs: %w", err)
		}
		if len(cfg.runs) == 0 && !cfg.capacity {
			return nil, errors.New("-runs: empty (and no -capacity): nothing to do")
		}
	} else {
		r, err := parseRun(*total + "/" + *step)
		if err != nil {
			return nil, fmt.Errorf("-total/-step: %w", err)
		}
		cfg.runs = []runSpec{r}
	}
	if cfg.strategies, err = parseStrategies(*strats); err != nil {
		return nil, fmt.Errorf("-strategies: %w", err)
	}
	if *reserve != "total" {
		if cfg.reserve, err = parseSize(*reserve); err != nil {
			return nil, fmt.Errorf("-reserve: %w (or total)", err)
		}
		cfg.reserveSet = true // 0 is the buffer's DefaultReserve
	}
	if cfg.capStep, err = parseSize(*capStep); err != nil {
		return nil, fmt.Errorf("-capacity-step: %w", err)
	}
	if cfg.capStep == 0 {
		return nil, errors.New("-capacity-step: must be more than 0")
	}
	return cfg, nil
}

// flagError is an error of the flag package, which prints its errors itself.
type flagError struct{ error }

func (e flagError) Unwrap() error { return e.error }

func strategyNames() string {
	var names []string
	for _, s := range strategies {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

func parseStrategies(s string) ([]strategy, error) {
	if strings.TrimSpace(s) == "all" {
		return strategies, nil
	}
	var out []strategy
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		st, ok := findStrategy(name)
		if !ok {
			return nil, fmt.Errorf("unknown strategy %q (want all or some of %s)", name, strategyNames())
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, st)
		}
	}
	return out, nil
}

// parseRuns parses "16GiB/64MiB,4GiB/2MiB"; an empty list is no runs.
func parseRuns(s string) ([]runSpec, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []runSpec
	for _, item := range strings.Split(s, ",") {
		r, err := parseRun(item)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func parseRun(s string) (runSpec, error) {
	tot, stp, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return runSpec{}, fmt.Errorf("run %q: want TOTAL/STEP, e.g. 16GiB/64MiB", s)
	}
	var r runSpec
	var err error
	if r.total, err = parseSize(tot); err != nil {
		return runSpec{}, fmt.Errorf("run %q: total: %w", s, err)
	}
	if r.step, err = parseSize(stp); err != nil {
		return runSpec{}, fmt.Errorf("run %q: step: %w", s, err)
	}
	switch {
	case r.step == 0 || r.total == 0:
		return runSpec{}, fmt.Errorf("run %q: the total and the step must be more than 0", s)
	case r.total < r.step || r.total%r.step != 0:
		return runSpec{}, fmt.Errorf("run %q: the total must be a multiple of the step", s)
	case r.total/r.step > maxSteps:
		return runSpec{}, fmt.Errorf("run %q: %d steps, more than %d", s, r.total/r.step, maxSteps)
	}
	return r, nil
}

// parseSize parses a byte count with an optional binary unit: 2MiB, 16GiB, 512KiB, 1TiB,
// also written 2M, 16G; a bare number is bytes.
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a whole number with an optional unit (B, KiB, MiB, GiB, TiB), e.g. 64MiB", s)
	}
	n, err := strconv.ParseUint(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
	case "k", "kib":
		shift = 10
	case "m", "mib":
		shift = 20
	case "g", "gib":
		shift = 30
	case "t", "tib":
		shift = 40
	default:
		return 0, fmt.Errorf("size %q: unit %q: want B, KiB, MiB, GiB or TiB (binary units)", s, t[i:])
	}
	if hi, _ := bits.Mul64(n, 1<<shift); hi != 0 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n << shift, nil
}

// stopwatch adds up the time it runs; the harness stops it while it samples memory.
type stopwatch struct {
	total time.Duration
	t0    time.Time
}

func (s *stopwatch) start() { s.t0 = time.Now() }
func (s *stopwatch) stop()  { s.total += time.Since(s.t0) }

// harness runs one strategy: it times the steps and samples device memory between them.
type harness struct {
	d        *device
	stepSize uint64
	steps    int
	reserve  uint64 // address space the growable buffer reserves ahead
	meminfo  bool

	sw        stopwatch
	base      uint64 // device memory in use before the strategy started
	cur, peak uint64 // in use now and at most, minus base
	sampleErr error
}

// sample reads the device memory in use. It runs with the stopwatch stopped.
func (h *harness) sample() {
	if !h.meminfo || h.sampleErr != nil {
		return
	}
	u, err := h.d.used()
	if err != nil {
		h.sampleErr = fmt.Errorf("cuMemGetInfo: %w", err)
		return
	}
	h.cur = u - min(u, h.base)
	h.peak = max(h.peak, h.cur)
}

// probe samples device memory in the middle of a step, where a strategy holds more than
// before or after it (cuMemAlloc+copy: the old and the new allocation), with the stopwatch
// stopped.
func (h *harness) probe() {
	h.sw.stop()
	h.sample()
	h.sw.start()
}

// point is the state after one step.
type point struct {
	size    uint64        // buffer size
	elapsed time.Duration // growth time so far (the last point includes the final cuCtxSynchronize)
	used    uint64        // device memory in use, minus the baseline
	peak    uint64        // the most in use so far, minus the baseline
	calls   int           // driver calls so far
}

type result struct {
	run      string // "16GiB/64MiB", or "capacity"
	strategy string
	spec     runSpec
	series   []point

	grow, teardown       time.Duration
	calls, teardownCalls int
	peak                 uint64
	extends, remaps      int
	copies               int
	meminfo              bool

	// capacity test
	reached      uint64 // bytes grown to before running out of memory
	devMem, free uint64 // device memory and what was free before the strategy started
	stoppedBy    error

	skipped string
	err     error
	note    string
}

func (r *result) status() string {
	switch {
	case r.skipped != "":
		return "skipped"
	case r.err != nil:
		return "failed"
	case r.stoppedBy != nil:
		return "out_of_memory"
	}
	return "ok"
}

const memallocNote = "cu ends each cuMemcpyDtoD and cuMemsetD8 with a cuCtxSynchronize of its own (grow.c does not); not counted"

// runStrategy grows one buffer with strategy st. In a capacity run the steps go on until
// the driver runs out of memory, which is then the expected end, not a failure.
func runStrategy(d *device, st strategy, r runSpec, cfg *config, capacity bool) *result {
	res := &result{run: r.label(), strategy: st.name, spec: r, meminfo: cfg.meminfo}
	if capacity {
		res.run = "capacity"
	}
	if st.needsContext {
		res.note = memallocNote
		if d.ctx == nil {
			res.skipped, res.note = errNoContext.Error(), ""
			return res
		}
	}
	h := &harness{d: d, stepSize: r.step, steps: r.steps(), reserve: cfg.reserve, meminfo: cfg.meminfo}
	if !cfg.reserveSet {
		h.reserve = r.total
	}
	if cfg.meminfo || capacity {
		free, total, err := d.memInfo()
		if err != nil {
			res.err = fmt.Errorf("cuMemGetInfo: %w", err)
			return res
		}
		h.base, res.free, res.devMem = total-min(free, total), free, total
	}
	g := st.newGrower(h)
	calls0 := d.be.calls
	var stepErr error
	for i := 0; i < h.steps; i++ {
		h.sw.start()
		err := g.step(i)
		h.sw.stop()
		h.sample()
		if err != nil {
			stepErr = fmt.Errorf("step %d (to %s): %w", i+1, units.Size(uint64(i+1)*r.step), err)
			break
		}
		res.series = append(res.series, point{size: uint64(i+1) * r.step, elapsed: h.sw.total,
			used: h.cur, peak: h.peak, calls: d.be.calls - calls0})
	}
	if capacity && stepErr != nil && errors.Is(stepErr, cu.ERROR_OUT_OF_MEMORY) {
		res.stoppedBy, stepErr = stepErr, nil
	}
	if stepErr == nil {
		h.sw.start()
		err := d.sync()
		h.sw.stop()
		if err != nil {
			stepErr = fmt.Errorf("cuCtxSynchronize: %w", err)
		} else if n := len(res.series); n > 0 {
			res.series[n-1].elapsed = h.sw.total
			res.series[n-1].calls = d.be.calls - calls0
		}
	}
	res.grow = h.sw.total
	res.calls = d.be.calls - calls0
	res.peak = h.peak
	res.reached = uint64(len(res.series)) * r.step
	res.extends, res.remaps, res.copies = g.counters()

	calls1 := d.be.calls
	t0 := time.Now()
	terr := g.teardown()
	res.teardown = time.Since(t0)
	res.teardownCalls = d.be.calls - calls1
	if terr != nil {
		terr = fmt.Errorf("teardown: %w", terr)
	}
	res.err = errors.Join(stepErr, terr, h.sampleErr)
	return res
}

// capacityStrategies are grown until the driver runs out of memory.
var capacityStrategies = []string{"buffer_exact", "memalloc_doubling"}

func runCapacity(d *device, cfg *config) ([]*result, error) {
	_, total, err := d.memInfo()
	if err != nil {
		return nil, fmt.Errorf("cuMemGetInfo: %w", err)
	}
	// Steps enough to pass the device's memory: the driver stops the growth first.
	n := total/cfg.capStep + 2
	if n > maxSteps {
		return nil, fmt.Errorf("-capacity-step %s: %d steps to pass %s of device memory, more than %d", units.Size(cfg.capStep), n, gib(total), maxSteps)
	}
	r := runSpec{total: n * cfg.capStep, step: cfg.capStep}
	c := *cfg
	c.reserveSet = false // the buffer reserves past the device's memory up front
	var out []*result
	for _, name := range capacityStrategies {
		st, _ := findStrategy(name)
		res := runStrategy(d, st, r, &c, true)
		if res.err == nil && res.skipped == "" && res.stoppedBy == nil {
			res.err = fmt.Errorf("grew to %s without running out of memory", units.Size(res.reached))
		}
		out = append(out, res)
	}
	return out, nil
}

func gib(n uint64) string { return fmt.Sprintf("%.2fGiB", float64(n)/(1<<30)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1e6) }

func printRun(w io.Writer, rs []*result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tgrow ms\tper step µs\tteardown ms\tcalls\tpeak GiB\tpeak/size\textends\tremaps\tcopies\t")
	var notes []string
	for _, r := range rs {
		switch {
		case r.skipped != "":
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", r.strategy)
			notes = append(notes, r.strategy+": "+r.skipped)
			continue
		case r.err != nil:
			fmt.Fprintf(tw, "%s\tFAILED\t-\t-\t-\t-\t-\t-\t-\t-\t\n", r.strategy)
			notes = append(notes, fmt.Sprintf("%s: %v", r.strategy, r.err))
			continue
		}
		perStep := float64(r.grow.Nanoseconds()) / 1e3 / float64(max(len(r.series), 1))
		peak, ratio := "-", "-"
		if r.meminfo {
			peak = fmt.Sprintf("%.2f", float64(r.peak)/(1<<30))
			ratio = fmt.Sprintf("%.2f", float64(r.peak)/float64(r.spec.total))
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t\n", r.strategy, ms(r.grow), perStep,
			ms(r.teardown), r.calls, peak, ratio, r.extends, r.remaps, r.copies)
		if r.note != "" {
			notes = append(notes, r.strategy+": "+r.note)
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func printCapacity(w io.Writer, rs []*result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncapacity: grow in %s steps until out of memory\n", units.Size(rs[0].spec.step))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\treached GiB\tdevice GiB\tfree GiB\tof device\tof free\tgrow ms\t")
	var notes []string
	for _, r := range rs {
		if r.skipped != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t\n", r.strategy)
			notes = append(notes, r.strategy+": "+r.skipped)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.1f%%\t%.1f%%\t%s\t\n", r.strategy, float64(r.reached)/(1<<30),
			float64(r.devMem)/(1<<30), float64(r.free)/(1<<30), pct(r.reached, r.devMem), pct(r.reached, r.free), ms(r.grow))
		if r.err != nil {
			notes = append(notes, fmt.Sprintf("%s: FAILED: %v", r.strategy, r.err))
		} else if r.stoppedBy != nil {
			notes = append(notes, fmt.Sprintf("%s: stopped by %v", r.strategy, r.stoppedBy))
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func pct(a, b uint64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return 100 * float64(a) / float64(b)
}

// seriesHeader is the header of the -csv file, which bench/plot reads.
var seriesHeader = []string{"run", "strategy", "step", "size_bytes", "elapsed_ns", "used_bytes", "peak_bytes", "calls"}

func writeSeries(w io.Writer, rs []*result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(seriesHeader); err != nil {
		return err
	}
	for _, r := range rs {
		if r.run == "capacity" {
			continue // the plot shows the growth runs
		}
		for i, p := range r.series {
			rec := []string{r.run, r.strategy, strconv.Itoa(i + 1), u(p.size), strconv.FormatInt(p.elapsed.Nanoseconds(), 10), "", "", strconv.Itoa(p.calls)}
			if r.meminfo {
				rec[5], rec[6] = u(p.used), u(p.peak)
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

var summaryHeader = []string{"run", "strategy", "status", "total_bytes", "step_bytes", "steps", "grow_ns", "teardown_ns",
	"calls", "teardown_calls", "peak_bytes", "extends", "remaps", "copies", "reached_bytes", "device_bytes", "free_bytes", "detail"}

func writeSummary(w io.Writer, rs []*result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(summaryHeader); err != nil {
		return err
	}
	for _, r := range rs {
		rec := []string{r.run, r.strategy, r.status(), u(r.spec.total), u(r.spec.step), strconv.Itoa(len(r.series)),
			strconv.FormatInt(r.grow.Nanoseconds(), 10), strconv.FormatInt(r.teardown.Nanoseconds(), 10),
			strconv.Itoa(r.calls), strconv.Itoa(r.teardownCalls), "", strconv.Itoa(r.extends), strconv.Itoa(r.remaps),
			strconv.Itoa(r.copies), "", "", "", ""}
		if r.meminfo {
			rec[10] = u(r.peak)
		}
		if r.run == "capacity" {
			rec[14], rec[15], rec[16] = u(r.reached), u(r.devMem), u(r.free)
		}
		var detail []string
		for _, s := range []string{r.skipped, r.note} {
			if s != "" {
				detail = append(detail, s)
			}
		}
		if r.err != nil {
			detail = append(detail, r.err.Error())
		}
		if r.stoppedBy != nil {
			detail = append(detail, "stopped by: "+r.stoppedBy.Error())
		}
		rec[17] = strings.Join(detail, "; ")
		if r.skipped != "" {
			for i := 5; i <= 16; i++ {
				rec[i] = ""
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }
