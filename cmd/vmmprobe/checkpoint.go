package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

func takesPid(command string) bool {
	return command == cmdCheckpointCheck || command == cmdCheckpoint || command == cmdRestore
}

// checkpointReport is what checkpoint-check, checkpoint and restore write.
type checkpointReport struct {
	Command   string            `json:"command"`
	Vmmprobe  programInfo       `json:"vmmprobe"`
	Process   checkpoint.Report `json:"process"`
	OK        bool              `json:"ok"`
	Error     string            `json:"error,omitempty"`
	Pairs     []string          `json:"gpu_pairs,omitempty"` // restore --to-gpu: OLD=NEW
	Notes     []string          `json:"notes,omitempty"`
	Steps     steps             `json:"steps"`
	Diagnosis string            `json:"diagnosis"`
}

// runCheckpoint runs checkpoint-check, checkpoint or restore on opts.pid; root is the
// machine's file system (its /proc).
func runCheckpoint(sel *opened, opts options, d deps, stdout io.Writer, warn func(string)) int {
	rep := checkpointReport{Command: opts.command, Vmmprobe: d.program(), Steps: steps{}}
	rep.Process = checkpoint.Preflight(d.root, opts.pid)
	var err error
	if opts.command != cmdCheckpointCheck && sel.backend() == nil {
		// The driver loaded but did not initialize: nothing to checkpoint with.
		rep.Error = "the CUDA driver did not initialize: " + oneLine(errText(sel.initErr))
		rep.Diagnosis = "failed"
		writeReport(opts, stdout, &rep, renderCheckpoint(&rep), false, warn)
		return exitNoDriver
	}
	switch opts.command {
	case cmdCheckpointCheck:
		rep.OK = len(rep.Process.Hazards) == 0
		rep.Diagnosis = "no hazard found: the driver may checkpoint it"
		if !rep.OK {
			rep.Diagnosis = strconv.Itoa(len(rep.Process.Hazards)) + " hazard(s): a checkpoint may fail or lose memory"
		}
	case cmdCheckpoint:
		if len(rep.Process.Hazards) > 0 {
			rep.Diagnosis = "refused: checkpoint-check finds " + strconv.Itoa(len(rep.Process.Hazards)) + " hazard(s); fix them first"
			break
		}
		var p *checkpoint.Process
		if p, err = checkpoint.NewIn(d.root, d.checkpointer(sel.backend()), opts.pid); err == nil {
			if err = rep.Steps.run("lock", func() error { return p.Lock(opts.pair.timeout) }); err == nil {
				err = rep.Steps.run("checkpoint", p.Checkpoint)
			}
		}
		rep.OK = err == nil
		rep.Diagnosis = "checkpointed: its GPU memory is in host memory, its GPUs released; restore it with vmmprobe restore " + strconv.Itoa(opts.pid)
	case cmdRestore:
		err = runRestore(sel, opts, d, &rep)
	}
	if err != nil {
		rep.Error = err.Error()
		rep.Diagnosis = "failed"
		if errors.Is(err, cu.ERROR_OUT_OF_MEMORY) {
			rep.Diagnosis = "failed: the GPU lacks the memory the process held; free some, or restore it onto another GPU (--to-gpu)"
		}
	}
	return writeReport(opts, stdout, &rep, renderCheckpoint(&rep), rep.OK, warn)
}

func renderCheckpoint(r *checkpointReport) string {
	var b strings.Builder
	p := r.Process
	// The name is the process's own choice: quoted, so that it cannot write lines of ours.
	kvLine(&b, 0, "process", fmt.Sprintf("%d %q, state %s, CUDA %s, GPUs %s, nvidiactl fds %d, dma-buf fds %d",
		p.Pid, p.Comm, p.State, yn(p.CUDA), joinInts(p.GPUs), p.Control, p.DmaBufs))
	for _, h := range p.Hazards {
		kvLine(&b, 0, "hazard", h.What)
		kvLine(&b, 2, "remedy", h.Remedy)
	}
	for _, h := range p.Warnings {
		kvLine(&b, 0, "warning", h.What)
		kvLine(&b, 2, "remedy", h.Remedy)
	}
	for _, n := range r.Notes {
		kvLine(&b, 0, "note", n)
	}
	if len(r.Pairs) > 0 {
		kvLine(&b, 0, "onto", strings.Join(r.Pairs, ", "))
	}
	verdictLines(&b, r.Command, r.OK, "", r.Diagnosis, r.Error)
	if len(r.Steps) > 0 {
		kvLine(&b, 0, "steps", r.Steps.String())
	}
	return b.String()
}

// runRestore restores opts.pid onto the GPUs --to-gpu names. Before the driver is asked,
// the process must be checkpointed, show no hazard, and the GPUs it goes to must have the
// memory (unless --force): on the real driver a restore refused for lack of memory could
// not be retried (H200, driver 580: OPERATING_SYSTEM, the process checkpointed for good).
// When the driver refuses the pairs as given (INVALID_VALUE: it wants every GPU the
// process saw paired), it retries once with them completed by checkpoint.CompletePairs,
// after the same memory check of every GPU the completion moves memory onto.
func runRestore(sel *opened, opts options, d deps, rep *checkpointReport) error {
	step := rep.Steps.run
	pairs, err := parseToGPU(opts.toGPU)
	if err != nil {
		return fmt.Errorf("--to-gpu: %w", err)
	}
	rep.Pairs = pairStrings(pairs)
	b := sel.backend()
	p, err := checkpoint.NewIn(d.root, d.checkpointer(b), opts.pid)
	if err != nil {
		return err
	}
	// A process that is not checkpointed gets that error (Restore's own check, before the
	// driver's restore), not a memory check.
	if s, err := p.State(); err != nil {
		return err
	} else if s != cu.PROCESS_STATE_CHECKPOINTED {
		return step("restore", func() error { return p.Restore(pairs...) })
	}
	if n := len(rep.Process.Hazards); n > 0 && !opts.force {
		rep.Diagnosis = "refused: the preflight finds " + strconv.Itoa(n) + " hazard(s); fix them first, or restore anyway with --force"
		return nil
	}
	devs, derr := d.gpus(b)
	host := make([]cu.UUID, len(devs))
	for i, dv := range devs {
		host[i] = dv.UUID
	}
	var completed []cu.GPUPair // every GPU of the host paired, for a retry
	if derr == nil && devs != nil {
		if completed, err = checkpoint.CompletePairs(pairs, host); err != nil {
			return fmt.Errorf("--to-gpu: %w", err)
		}
	}
	// refuse says whether the memory check refuses pairs (a hazard), or lets them through
	// (with --force, as a warning).
	refuse := func(ps []cu.GPUPair) bool {
		var h *checkpoint.Hazard
		switch {
		case derr != nil:
			h = &checkpoint.Hazard{What: "the GPUs' free memory could not be read (" + oneLine(derr.Error()) + "): a restore refused for lack of memory could not be retried",
				Remedy: "make the GPUs readable to vmmprobe, or restore anyway with --force"}
		case devs != nil:
			h = memoryHazard(ps, rep.Process, devs)
		}
		if h == nil {
			return false
		}
		if opts.force {
			rep.Process.Warnings = append(rep.Process.Warnings, *h)
			return false
		}
		rep.Process.Hazards = append(rep.Process.Hazards, *h)
		rep.Diagnosis = "refused: the GPUs it goes to may lack the memory; fix that first, or restore anyway with --force"
		return true
	}
	if refuse(pairs) {
		return nil
	}
	err = step("restore", func() error { return p.Restore(pairs...) })
	if refusedPairs(err) && len(pairs) > 0 && len(completed) > len(pairs) {
		var moved []string
		for _, q := range completed[len(pairs):] {
			if q.Old != q.New {
				moved = append(moved, q.Old.String()+" to "+q.New.String())
			}
		}
		what := "the driver refused the pairs as given (" + resultName(err) + "): it wants every GPU the process saw paired"
		if len(moved) > 0 {
			what += "; pairing them also moves " + strings.Join(moved, ", ")
		}
		if refuse(completed) {
			rep.Notes = append(rep.Notes, what+"; not retried")
		} else {
			rep.Notes = append(rep.Notes, what+"; retried so")
			rep.Pairs = pairStrings(completed)
			if err2 := step("restore, every GPU paired", func() error { return p.Restore(completed...) }); err2 != nil {
				err = fmt.Errorf("with the pairs as given: %w; with every GPU paired: %w", err, err2)
			} else {
				err = nil
			}
		}
	}
	if err == nil {
		err = step("unlock", p.Unlock)
	}
	rep.OK = err == nil
	rep.Diagnosis = "restored and running"
	if s, serr := p.State(); err != nil && serr == nil && s == cu.PROCESS_STATE_CHECKPOINTED {
		rep.Notes = append(rep.Notes, "the process is still checkpointed")
	}
	return err
}

// refusedPairs says whether err is the driver's restore refusing its arguments
// (INVALID_VALUE from cuCheckpointProcessRestore itself, not from a state query).
func refusedPairs(err error) bool {
	var ce *cu.Error
	return errors.As(err, &ce) && ce.Op == "cuCheckpointProcessRestore" && errors.Is(ce, cu.ERROR_INVALID_VALUE)
}

// backendGPUs are the CUDA devices with their free memory on the real driver, none on the
// simulator (which has no checkpoint: its Restore says so).
func backendGPUs(b vmm.Backend) ([]device, error) {
	if b == nil || b.Name() != "cuda" {
		return nil, nil
	}
	return cudaDevices()
}

// device is a CUDA device of this host: its UUID and free memory.
type device struct {
	UUID cu.UUID
	Free uint64
}

// cudaDevices lists the CUDA devices with their free memory, each from a reference to its
// primary context taken for the question and dropped (one kept would take memory from the
// restore).
func cudaDevices() ([]device, error) {
	n, err := cu.DeviceCount()
	if err != nil {
		return nil, err
	}
	devs := make([]device, n)
	for i := range devs {
		d, err := cu.DeviceGet(i)
		if err != nil {
			return nil, err
		}
		if devs[i].UUID, err = d.UUID(); err != nil {
			return nil, err
		}
		c, err := d.PrimaryContext()
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		devs[i].Free, _, err = c.MemGetInfo()
		if err = errors.Join(err, c.Release()); err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
	}
	return devs, nil
}

// memoryHazard says whether the GPUs the process goes to may lack the memory its
// checkpoint holds (its anonymous resident memory, unknown when 0): each GPU a pair moves
// memory onto must have that much free, since how the process's memory was spread over its
// GPUs cannot be told; without pairs, the GPU with the most free memory (its own GPUs cannot
// be told once it is checkpointed). It is a bound: the resident memory counts the process's
// own heap too.
func memoryHazard(pairs []cu.GPUPair, proc checkpoint.Report, devs []device) *checkpoint.Hazard {
	remedy := "free device memory, restore it onto other GPUs (--to-gpu OLD=NEW), or, if the process's own host memory is what makes the difference, --force"
	if proc.Resident == 0 {
		return &checkpoint.Hazard{What: "the process's resident memory, which holds its checkpoint, could not be read (/proc/PID/status): whether its GPUs have room cannot be told", Remedy: remedy}
	}
	free := map[cu.UUID]uint64{}
	var most uint64
	for _, d := range devs {
		free[d.UUID] = d.Free
		most = max(most, d.Free)
	}
	if len(pairs) == 0 {
		if proc.Resident <= most {
			return nil
		}
		return &checkpoint.Hazard{What: fmt.Sprintf("no GPU has as much free memory as the process holds of anonymous host memory, its checkpoint among it (%s; the most free is %s): a restore refused for lack of memory could not be retried, the process staying checkpointed for good",
			units.Size(proc.Resident), units.Size(most)), Remedy: remedy}
	}
	var short []string
	for _, p := range pairs {
		if f := free[p.New]; f < proc.Resident {
			short = append(short, fmt.Sprintf("%v has %s free", p.New, units.Size(f)))
		}
	}
	if len(short) == 0 {
		return nil
	}
	return &checkpoint.Hazard{What: fmt.Sprintf("the process holds %s of anonymous host memory, its checkpoint among it, and %s: a restore refused for lack of memory could not be retried, the process staying checkpointed for good",
		units.Size(proc.Resident), strings.Join(short, ", ")), Remedy: remedy}
}

// parseToGPU reads --to-gpu: OLD=NEW pairs of GPU UUIDs, separated by commas.
func parseToGPU(spec string) ([]cu.GPUPair, error) {
	if spec == "" {
		return nil, nil
	}
	var pairs []cu.GPUPair
	for _, p := range strings.Split(spec, ",") {
		o, n, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not OLD=NEW (the driver needs the GPU the process had: a checkpointed process shows none)", p)
		}
		old, err := cu.ParseUUID(strings.TrimSpace(o))
		if err != nil {
			return nil, err
		}
		new, err := cu.ParseUUID(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		for _, q := range pairs {
			if q.Old == old || q.New == new {
				return nil, fmt.Errorf("%v or %v is named twice", old, new)
			}
		}
		pairs = append(pairs, cu.GPUPair{Old: old, New: new})
	}
	return pairs, nil
}

func pairStrings(pairs []cu.GPUPair) []string {
	var s []string
	for _, p := range pairs {
		s = append(s, p.Old.String()+"="+p.New.String())
	}
	return s
}
