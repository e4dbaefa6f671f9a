//go:build !linux

package main

import (
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/vmm"
)

func parent(r *run.Report, be vmm.Backend, f run.Flags, d devices) {
	r.Note("descriptor passing (SCM_RIGHTS) needs Linux: nothing to verify here")
}

func childMain(f run.Flags, d devices, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "ipc: --child needs Linux")
	return run.ExitUsage
}
