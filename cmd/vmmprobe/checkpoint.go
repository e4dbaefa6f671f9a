package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/checkpoint"
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
		if p, err = checkpoint.New(checkpoint.For(sel.backend()), opts.pid); err == nil {
			if err = step("restore", func() error { return p.Restore() }); err == nil {
				err = step("unlock", p.Unlock)
			}
		}
		rep.OK = err == nil
		rep.Diagnosis = "restored and running"
	}
	if err != nil {
		rep.Error = err.Error()
		rep.Diagnosis = "failed"
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
