// Command sleep puts a model-like set of buffers (weights and a KV cache) to sleep and
// wakes them, in each of package sleep's modes, as an RL trainer does with its inference
// engine between rollouts: it checks that the device memory goes back while they sleep,
// that every address stays, and every byte after the wake (zeros after a discard).
//
//	go run ./examples/sleep [--backend=auto|cuda|sim] [--preset NAME]
//
// It exits 0 when everything verified, 1 when something did not, 2 on a usage error and 3
// when --backend=cuda finds no driver.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sleep"
)

func main() { run.Main(realMain) }

const mib = 1 << 20

func realMain(args []string, stdout, stderr io.Writer) int {
	f, code, ok := run.Parse("sleep", args, "h200", stderr, nil)
	if !ok {
		return code
	}
	be, code, err := run.Open("sleep", f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sleep:", err)
		return code
	}
	r := &run.Report{W: stdout}
	fmt.Fprintf(stdout, "sleep: backend %s\n", be.Name())
	m := vmm.New(be)
	ctx := context.Background()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		cycle(ctx, r, m, mode)
	}
	return r.Exit()
}

// cycle makes a pool with weights (256 MiB) and a KV cache (128 MiB) under one tag, puts
// the tag to sleep in mode and wakes it.
func cycle(ctx context.Context, r *run.Report, m *vmm.Manager, mode sleep.Mode) {
	p := sleep.New(m, sleep.Options{})
	defer func() { r.Check(p.Close(), "%v: closed the pool", mode) }()
	var regions []*sleep.Region
	var want [][]byte
	for i, size := range []uint64{256 * mib, 128 * mib} {
		reg, err := p.Alloc("engine", size, 0)
		if !r.Check(err, "%v: allocated %s under tag engine", mode, units.Size(size)) {
			return
		}
		b := pattern.Bytes(byte(i+1), int(size))
		if _, err := reg.WriteAt(b, 0); !r.Check(err, "%v: filled it", mode) {
			return
		}
		regions, want = append(regions, reg), append(want, b)
	}
	if !r.Check(p.Prepare("engine"), "%v: prepared the host memory ahead", mode) {
		return
	}
	free0, _, ferr := m.MemInfo(0)
	if !r.Check(p.Sleep(ctx, "engine", mode), "%v: the tag sleeps", mode) {
		return
	}
	if free1, _, err := m.MemInfo(0); ferr == nil && err == nil {
		r.Note("%v: device 0's free memory rose by %s", mode, units.Size(free1-free0))
	}
	if !r.Check(p.Wake(ctx, "engine"), "%v: the tag woke", mode) {
		return
	}
	for i, reg := range regions {
		got := make([]byte, reg.Size())
		if _, err := reg.ReadAt(got, 0); !r.Check(err, "%v: read region %d back", mode, i) {
			return
		}
		if mode == sleep.Discard {
			want[i] = make([]byte, len(got))
		}
		if !bytes.Equal(want[i], got) {
			r.Fail("%v: region %d at %v: the bytes differ after the wake", mode, i, reg.Base())
			continue
		}
		r.Note("%v: region %d at %v: every byte checked (%s)", mode, i, reg.Base(), map[bool]string{true: "zeros", false: "as written"}[mode == sleep.Discard])
	}
}
