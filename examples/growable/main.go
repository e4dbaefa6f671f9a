// Command growable grows a device buffer whose base address does not move, the way NVIDIA's
// VMM blog grows its vector, and verifies that no byte moved or changed: through in-place
// extensions of the reservation, a forced refusal of the fixed-address hint (the buffer is
// remapped, not copied), a shrink and a regrowth.
//
//	go run ./examples/growable [--backend=auto|cuda|sim] [--preset NAME] [--size MiB]
//
// It exits 0 when everything verified, 1 when something did not, 2 on a usage error and 3
// when --backend=cuda finds no driver.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
)

func main() { run.Main(realMain) }

const mib = 1 << 20

func realMain(args []string, stdout, stderr io.Writer) int {
	var sizeMiB uint64
	f, code, ok := run.Parse("growable", args, "h100", stderr, func(fs *flag.FlagSet) {
		fs.Uint64Var(&sizeMiB, "size", 256, "grow to this many `MiB`")
	})
	if !ok {
		return code
	}
	if sizeMiB < 8 || sizeMiB > 1<<20 {
		fmt.Fprintln(stderr, "growable: --size must be 8 to 1048576 MiB")
		return run.ExitUsage
	}
	be, code, err := run.Open("growable", f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "growable:", err)
		return code
	}
	r := &run.Report{W: stdout}
	fmt.Fprintf(stdout, "growable: backend %s\n", be.Name())
	verify(r, be, sizeMiB*mib)
	return r.Exit()
}

func verify(r *run.Report, be vmm.Backend, total uint64) {
	m := vmm.New(be)
	// Reserve little up front so that growth has to extend the reservation.
	b, err := buffer.New(m, 0, buffer.Options{Reserve: 8 * mib})
	if !r.Check(err, "new buffer (8 MiB of address space reserved)") {
		return
	}
	defer func() { r.Check(b.Close(), "close: every chunk unmapped and released, every range freed") }()

	// Grow in uneven steps, writing each new part, and check everything so far each time.
	base := b.Base()
	var want []byte
	step := uint64(3*mib + 4096)
	for size := step; size <= total; size += step {
		if err := b.Grow(size); err != nil {
			r.Fail("grow to %s: %v", units.Size(size), err)
			return
		}
		part := pattern.Bytes(byte(len(want)/int(step)), int(size)-len(want))
		if _, err := b.WriteAt(part, int64(len(want))); err != nil {
			r.Fail("write at %d: %v", len(want), err)
			return
		}
		want = append(want, part...)
	}
	st := b.Stats()
	if b.Base() == base || st.Remaps > 0 {
		r.OK("grew to %s in %d steps: %d chunks, %d reservation extensions, %d remaps, %d driver calls",
			units.Size(st.Size), len(want)/int(step), st.Chunks, st.Extends, st.Remaps, st.Calls)
	} else {
		r.Fail("base moved from %v to %v without a remap", base, b.Base())
	}
	if st.Remaps == 0 {
		r.OK("base address unchanged: %v", b.Base())
	} else {
		r.Note("the driver refused %d hint(s): the buffer was remapped %d time(s) (no copy)", st.HintsRefused, st.Remaps)
	}
	check(r, b, want, "every byte written during growth reads back")

	// Take the addresses right after the buffer, so that the next extension is refused.
	at := b.Base() + cu.DevicePtr(st.Reserved)
	blocker, err := be.Reserve(2*mib, 0, at, 0)
	if !r.Check(err, "reserve 2 MiB right after the buffer") {
		return
	}
	defer func() { r.Check(be.Free(blocker, 2*mib), "free the blocking range") }()
	chunks := b.Chunks()
	if err := b.Grow(st.Reserved + mib); err != nil {
		r.Fail("grow past the blocked range: %v", err)
		return
	}
	st2 := b.Stats()
	switch {
	case blocker != at:
		r.Note("the driver placed the blocker elsewhere (%v): no refusal to test", blocker)
	case st2.Remaps == st.Remaps+1 && st2.HintsRefused == st.HintsRefused+1:
		r.OK("hint refused: moved %v -> %v by remapping the same %d chunks", base, b.Base(), len(chunks))
	default:
		r.Fail("expected a remap: %+v", st2)
	}
	same := true
	for i, c := range b.Chunks()[:len(chunks)] {
		same = same && c == chunks[i]
	}
	if same {
		r.OK("the physical chunks are the same handles: nothing was copied")
	} else {
		r.Fail("the chunks changed")
	}
	check(r, b, want, "every byte reads back at the new base")

	// Shrink releases tail chunks; growing back reuses the reservation.
	half := uint64(len(want) / 2)
	before := b.Base()
	if r.Check(b.Shrink(half), "shrink to %s (%d chunks released)", units.Size(half), st2.Chunks-b.Stats().Chunks) {
		check(r, b, want[:half], "the first half survives the shrink")
	}
	if r.Check(b.Grow(total), "grow back to %s", units.Size(total)) {
		if b.Base() == before {
			r.OK("grew back in place")
		} else {
			r.Fail("moved while growing back inside its reservation")
		}
		check(r, b, want[:half], "the first half survives the regrowth")
	}
}

func check(r *run.Report, b *buffer.Buffer, want []byte, what string) {
	got := make([]byte, len(want))
	if _, err := b.ReadAt(got, 0); err != nil {
		r.Fail("%s: %v", what, err)
		return
	}
	if i := firstDiff(want, got); i >= 0 {
		r.Fail("%s: byte %d of %d differs", what, i, len(want))
		return
	}
	r.OK("%s (%s)", what, units.Size(uint64(len(want))))
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}
