package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
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
	Steps     []pairStep        `json:"steps"`
	Diagnosis string            `json:"diagnosis"`
}

// runCheckpoint runs checkpoint-check, checkpoint or restore on opts.pid; root is the
// machine's file system (its /proc).
func runCheckpoint(sel *opened, opts options, d deps, stdout io.Writer, warn func(string)) int {
	rep := checkpointReport{Command: opts.command, Vmmprobe: programInfo{Version: d.build.Version, Revision: d.build.Revision}, Steps: []pairStep{}}
	rep.Process = checkpoint.Preflight(d.root, opts.pid)
	step := func(name string, f func() error) error {
		t0 := time.Now()
		err := f()
		rep.Steps = append(rep.Steps, pairStep{Step: name, Microseconds: time.Since(t0).Microseconds()})
		return err
	}
	var err error
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
		if p, err = checkpoint.New(checkpoint.For(sel.backend()), opts.pid); err == nil {
			if err = step("lock", func() error { return p.Lock(opts.pair.timeout) }); err == nil {
				err = step("checkpoint", p.Checkpoint)
			}
		}
		rep.OK = err == nil
		rep.Diagnosis = "checkpointed: its GPU memory is in host memory, its GPUs released; restore it with vmmprobe restore " + strconv.Itoa(opts.pid)
	case cmdRestore:
		err = runRestore(sel, opts, &rep, step)
	}
	if err != nil {
		rep.Error = err.Error()
		rep.Diagnosis = "failed"
		if errors.Is(err, cu.ERROR_OUT_OF_MEMORY) {
			rep.Diagnosis = "failed: the GPU lacks the memory the process held; free some, or restore it onto another GPU (--to-gpu)"
		}
	}
	if err := writeReport(opts, stdout, &rep, func() string { return renderCheckpoint(&rep) }); err != nil {
		warn(err.Error())
		return exitFailure
	}
	if !rep.OK {
		return exitCheckFailed
	}
	return exitOK
}

func renderCheckpoint(r *checkpointReport) string {
	var b strings.Builder
	p := r.Process
	yes := map[bool]string{true: "yes", false: "no"}
	gpus := make([]string, len(p.GPUs))
	for i, g := range p.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	kvLine(&b, 0, "process", fmt.Sprintf("%d (%s), state %s, CUDA %s, GPUs %s, nvidiactl fds %d, dma-buf fds %d",
		p.Pid, p.Comm, p.State, yes[p.CUDA], strings.Join(gpus, ","), p.Control, p.DmaBufs))
	for _, h := range p.Hazards {
		kvLine(&b, 0, "hazard", h.What)
		kvLine(&b, 2, "remedy", h.Remedy)
	}
	verdict := "ok: " + r.Diagnosis
	if !r.OK {
		verdict = "FAILED: " + r.Diagnosis
	}
	if len(r.Pairs) > 0 {
		kvLine(&b, 0, "onto", strings.Join(r.Pairs, ", "))
	}
	kvLine(&b, 0, r.Command, verdict)
	if r.Error != "" {
		kvLine(&b, 2, "error", oneLine(r.Error))
	}
	if len(r.Steps) > 0 {
		var steps []string
		for _, s := range r.Steps {
			steps = append(steps, fmt.Sprintf("%s %s", s.Step, time.Duration(s.Microseconds)*time.Microsecond))
		}
		kvLine(&b, 0, "steps", strings.Join(steps, ", "))
	}
	return b.String()
}

// runRestore restores opts.pid onto the GPUs --to-gpu names (completed with the host's
// other GPUs when the driver wants every GPU paired) after checking that the GPUs it goes
// to have the memory: on the real driver a restore refused for lack of memory could not be
// retried (H200, driver 580: OPERATING_SYSTEM, the process checkpointed for good).
func runRestore(sel *opened, opts options, rep *checkpointReport, step func(string, func() error) error) error {
	pairs, err := parseToGPU(opts.toGPU)
	if err != nil {
		return err
	}
	b := sel.backend()
	var completed []cu.GPUPair
	if b.Name() == "cuda" { // the simulator has no checkpoint: its Restore says so
		devs, err := cudaDevices()
		if err != nil {
			return err
		}
		var h *checkpoint.Hazard
		if completed, h, err = restorePlan(pairs, rep.Process, devs); err != nil {
			return err
		}
		if h != nil {
			rep.Process.Hazards = append(rep.Process.Hazards, *h)
			rep.Diagnosis = "refused: the GPUs it goes to may lack the memory; fix that first"
			return nil
		}
	}
	rep.Pairs = pairStrings(pairs)
	p, err := checkpoint.New(checkpoint.For(b), opts.pid)
	if err != nil {
		return err
	}
	err = step("restore", func() error { return p.Restore(pairs...) })
	if errors.Is(err, cu.ERROR_INVALID_VALUE) && len(pairs) > 0 && len(completed) > len(pairs) {
		rep.Pairs = pairStrings(completed)
		err = step("restore, every GPU paired", func() error { return p.Restore(completed...) })
	}
	if err == nil {
		err = step("unlock", p.Unlock)
	}
	rep.OK = err == nil
	rep.Diagnosis = "restored and running"
	return err
}

// device is a CUDA device of this host: its UUID and free memory.
type device struct {
	UUID cu.UUID
	Free uint64
}

// cudaDevices lists the CUDA devices with their free memory, each from a primary context
// made for the question and released (one kept would take memory from the restore).
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
		c, err := d.Primary()
		if err != nil {
			return nil, err
		}
		devs[i].Free, _, err = c.MemGetInfo()
		if err = errors.Join(err, c.Release()); err != nil {
			return nil, err
		}
	}
	return devs, nil
}

// restorePlan completes pairs with the host's other GPUs (see checkpoint.CompletePairs)
// and says whether the GPUs the process goes to (all of them without pairs, the process's
// own being unknown once checkpointed) have less free memory in all than the process's
// resident memory, which holds its checkpoint.
func restorePlan(pairs []cu.GPUPair, proc checkpoint.Report, devs []device) ([]cu.GPUPair, *checkpoint.Hazard, error) {
	host := make([]cu.UUID, len(devs))
	free := map[cu.UUID]uint64{}
	for i, d := range devs {
		host[i], free[d.UUID] = d.UUID, d.Free
	}
	var completed []cu.GPUPair
	targets := host
	if len(pairs) > 0 {
		var err error
		if completed, err = checkpoint.CompletePairs(pairs, host); err != nil {
			return nil, nil, err
		}
		targets = nil
		for _, p := range pairs {
			targets = append(targets, p.New)
		}
	}
	var sum uint64
	for _, u := range targets {
		sum += free[u]
	}
	if proc.Resident > sum {
		return completed, &checkpoint.Hazard{
			What: fmt.Sprintf("the GPUs it goes to have %s free in all, and the process holds %s of host memory, its checkpoint among it: a restore refused for lack of memory could not be retried (the process stayed checkpointed for good)",
				units.Size(sum), units.Size(proc.Resident)),
			Remedy: "free device memory, or restore it onto other GPUs (--to-gpu OLD=NEW)"}, nil
	}
	return completed, nil, nil
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
