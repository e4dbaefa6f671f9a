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
		var p *checkpoint.Process
		var pairs []cu.GPUPair
		if pairs, err = restorePairs(opts.toGPU, rep.Process); err == nil {
			rep.Pairs = pairStrings(pairs)
			if p, err = checkpoint.New(checkpoint.For(sel.backend()), opts.pid); err == nil {
				if err = step("restore", func() error { return p.Restore(pairs...) }); err == nil {
					err = step("unlock", p.Unlock)
				}
			}
		}
		rep.OK = err == nil
		rep.Diagnosis = "restored and running"
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

// parseToGPU reads --to-gpu: one UUID (to), or OLD=NEW pairs separated by commas.
func parseToGPU(spec string) (to *cu.UUID, pairs []cu.GPUPair, err error) {
	if spec == "" {
		return nil, nil, nil
	}
	if !strings.Contains(spec, "=") {
		u, err := cu.ParseUUID(spec)
		return &u, nil, err
	}
	for _, p := range strings.Split(spec, ",") {
		o, n, ok := strings.Cut(p, "=")
		if !ok {
			return nil, nil, fmt.Errorf("%q is not OLD=NEW", p)
		}
		old, err := cu.ParseUUID(strings.TrimSpace(o))
		if err != nil {
			return nil, nil, err
		}
		new, err := cu.ParseUUID(strings.TrimSpace(n))
		if err != nil {
			return nil, nil, err
		}
		for _, q := range pairs {
			if q.Old == old {
				return nil, nil, fmt.Errorf("%v is named twice", old)
			}
		}
		pairs = append(pairs, cu.GPUPair{Old: old, New: new})
	}
	return nil, pairs, nil
}

// restorePairs are the driver's pairs for --to-gpu: as given, or for a single UUID the
// one GPU the process has open (its preflight) paired with it.
func restorePairs(spec string, proc checkpoint.Report) ([]cu.GPUPair, error) {
	to, pairs, err := parseToGPU(spec)
	if err != nil || to == nil {
		return pairs, err
	}
	if len(proc.GPUUUIDs) != 1 || proc.GPUUUIDs[0] == "" {
		return nil, fmt.Errorf("--to-gpu %s: the GPU the process used cannot be told from here (it has %d GPU files open); name it: --to-gpu OLD=NEW", to, len(proc.GPUs))
	}
	old, err := cu.ParseUUID(proc.GPUUUIDs[0])
	if err != nil {
		return nil, err
	}
	return []cu.GPUPair{{Old: old, New: *to}}, nil
}

func pairStrings(pairs []cu.GPUPair) []string {
	var s []string
	for _, p := range pairs {
		s = append(s, p.Old.String()+"="+p.New.String())
	}
	return s
}
