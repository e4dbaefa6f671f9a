//go:build !linux

package main

import (
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/vmm"
)

func parent(r *run.Report, be vmm.Backend, f run.Flags) {
	r.Note("descriptor passing (SCM_RIGHTS) needs Linux: nothing to verify here")
}

func childMain(f run.Flags, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "ipc: --child needs Linux")
	return run.ExitUsage
}
