// Command vectoradd runs a vector-add kernel, c[i] = a[i] + b[i] on float32, on device
// memory from VMM: three growable buffers (vmm/buffer: memory created, address space
// reserved, mapped and made accessible to the device), inputs copied in, the kernel loaded
// from hand-written PTX and launched through package cu, and every element of c checked.
//
//	go run ./examples/vectoradd [--backend=auto|cuda|sim] [--preset NAME] [--device N] [--n COUNT]
//
// The sim backend has no kernels: there it says that the launch needs a GPU and checks
// everything else (allocation, mapping, the copies in and reading them back), and exits 0.
// It exits 0 when everything verified, 1 when something did not, 2 on a usage error and 3
// when --backend=cuda finds no driver.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/internal/kernels"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
)

func main() { run.Main(realMain) }

const (
	blockSize = 256
	maxN      = 1 << 28 // 1 GiB per vector
	// sentinel fills c before the launch: a quiet NaN, which no sum of the inputs is, so an
	// element the kernel did not write cannot pass.
	sentinel = 0x7fc0dead
)

func realMain(args []string, stdout, stderr io.Writer) int {
	var n uint64
	var dev int
	f, code, ok := run.Parse("vectoradd", args, "h100", stderr, func(fs *flag.FlagSet) {
		fs.Uint64Var(&n, "n", 1<<20+3, "`count` of float32 elements per vector")
		fs.IntVar(&dev, "device", 0, "device `ordinal` that holds the vectors and runs the kernel")
	})
	if !ok {
		return code
	}
	if n < 1 || n > maxN {
		fmt.Fprintf(stderr, "vectoradd: --n must be 1 to %d\n", maxN)
		return run.ExitUsage
	}
	if dev < 0 {
		fmt.Fprintln(stderr, "vectoradd: --device must be 0 or more")
		return run.ExitUsage
	}
	be, code, err := run.Open("vectoradd", f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "vectoradd:", err)
		return code
	}
	if count, err := be.DeviceCount(); err != nil || dev >= count {
		fmt.Fprintf(stderr, "vectoradd: no device %d (%d devices, %v)\n", dev, count, err)
		return run.ExitFailed
	}
	r := &run.Report{W: stdout}
	fmt.Fprintf(stdout, "vectoradd: backend %s, device %d, %d elements\n", be.Name(), dev, n)
	verify(r, be, dev, int(n))
	return r.Exit()
}

// inputs returns a and b: finite values that vary with the index, whose sums are never
// NaN (nor the sentinel).
func inputs(n int) (a, b []float32) {
	a, b = make([]float32, n), make([]float32, n)
	for i := range n {
		a[i] = float32(i%4099)*0.5 - 1000
		b[i] = float32(i) * 0.25
	}
	return a, b
}

// firstWrong returns the first index where c is not a+b, computed in float32 as the GPU's
// add.f32 (round to nearest even) does, or -1.
func firstWrong(a, b, c []float32) int {
	if len(c) != len(a) || len(b) != len(a) {
		return 0
	}
	for i := range a {
		if want := a[i] + b[i]; math.Float32bits(c[i]) != math.Float32bits(want) {
			return i
		}
	}
	return -1
}

func encode(v []float32) []byte {
	p := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(p[4*i:], math.Float32bits(x))
	}
	return p
}

func decode(p []byte) []float32 {
	v := make([]float32, len(p)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return v
}

func verify(r *run.Report, be vmm.Backend, dev, n int) {
	m := vmm.New(be)
	size := uint64(4 * n)
	var bufs [3]*buffer.Buffer
	for i, name := range []string{"a", "b", "c"} {
		b, err := buffer.New(m, size, buffer.Options{Device: dev})
		if err != nil {
			r.Fail("%s: buffer of %s on device %d: %v", name, units.Size(size), dev, err)
			return
		}
		st := b.Stats()
		r.OK("%s: %s buffer at %v: %s of device %d memory created, mapped and made accessible (%d chunk(s))",
			name, units.Size(size), b.Base(), units.Size(st.Committed), dev, st.Chunks)
		defer func() { r.Check(b.Close(), "%s: unmapped, released and freed", name) }()
		bufs[i] = b
	}
	ba, bb, bc := bufs[0], bufs[1], bufs[2]

	a, b := inputs(n)
	fill := make([]float32, n)
	for i := range fill {
		fill[i] = math.Float32frombits(sentinel)
	}
	for _, in := range []struct {
		name string
		buf  *buffer.Buffer
		v    []float32
	}{{"a", ba, a}, {"b", bb, b}, {"c", bc, fill}} {
		want := encode(in.v)
		if _, err := in.buf.WriteAt(want, 0); err != nil {
			r.Fail("%s: copy in: %v", in.name, err)
			return
		}
		got := make([]byte, len(want))
		if _, err := in.buf.ReadAt(got, 0); err != nil {
			r.Fail("%s: read back: %v", in.name, err)
			return
		}
		if i := firstDiffWord(want, got); i >= 0 {
			r.Fail("%s: element %d reads back %#x, want %#x", in.name, i, binary.LittleEndian.Uint32(got[4*i:]), binary.LittleEndian.Uint32(want[4*i:]))
			return
		}
		r.OK("%s: copied in and read back at %v, all %d elements", in.name, in.buf.Base(), n)
	}

	if be.Name() != "cuda" {
		r.Note("kernels need a GPU: the %s backend cannot load or launch vadd; the launch and the check of c were skipped", be.Name())
		return
	}
	if !launch(r, dev, ba.Base(), bb.Base(), bc.Base(), n) {
		return
	}

	got := make([]byte, size)
	if _, err := bc.ReadAt(got, 0); !r.Check(err, "c: read back") {
		return
	}
	c := decode(got)
	if i := firstWrong(a, b, c); i >= 0 {
		r.Fail("c[%d] = %v, want %v + %v = %v", i, c[i], a[i], b[i], a[i]+b[i])
		return
	}
	r.OK("c[i] == a[i] + b[i] for all %d elements", n)
}

// launch loads vadd into device dev's primary context and runs it over n elements. Only
// the real driver gets here: the context comes from package cu, not from the backend.
func launch(r *run.Report, dev int, a, b, c cu.DevicePtr, n int) bool {
	d, err := cu.DeviceGet(dev)
	if !r.Check(err, "device %d", dev) {
		return false
	}
	ctx, err := d.Primary()
	if !r.Check(err, "device %d: primary context", dev) {
		return false
	}
	mod, err := ctx.ModuleLoadData([]byte(kernels.VAdd))
	if !r.Check(err, "loaded the vadd PTX (JIT-compiled by the driver for device %d)", dev) {
		return false
	}
	defer func() { r.Check(mod.Unload(), "unloaded the module") }()
	k, err := mod.Function("vadd")
	if !r.Check(err, "found kernel vadd") {
		return false
	}
	grid := uint32((n + blockSize - 1) / blockSize)
	err = ctx.Launch(k, [3]uint32{grid, 1, 1}, [3]uint32{blockSize, 1, 1}, 0, a, b, c, uint32(n))
	return r.Check(err, "launched vadd on %d blocks of %d threads and synchronized", grid, blockSize)
}

// firstDiffWord returns the index of the first 4-byte word where a and b differ, or -1.
func firstDiffWord(a, b []byte) int {
	for i := 0; i+4 <= len(a) && i+4 <= len(b); i += 4 {
		if binary.LittleEndian.Uint32(a[i:]) != binary.LittleEndian.Uint32(b[i:]) {
			return i / 4
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b)) / 4
	}
	return -1
}
