// Command peer stripes one range of device addresses over every GPU, as cuda-samples'
// vectorAddMMAP does, and shares memory of one GPU with the others read-write and
// read-only, then revokes it; it verifies every byte and every access it expects.
//
//	go run ./examples/peer [--backend=auto|cuda|sim] [--preset NAME]
//
// On sim the default preset is hgx8 (eight H200s, all peers). On a machine with one GPU
// the stripes all live on it and the peer grants are skipped (it says so). It exits 0 when
// everything verified, 1 when something did not, 2 on a usage error and 3 when
// --backend=cuda finds no driver.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/peer"
)

func main() { run.Main(realMain) }

const mib = 1 << 20

func realMain(args []string, stdout, stderr io.Writer) int {
	f, code, ok := run.Parse("peer", args, "hgx8", stderr, nil)
	if !ok {
		return code
	}
	be, code, err := run.Open("peer", f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "peer:", err)
		return code
	}
	n, err := be.DeviceCount()
	if err != nil {
		fmt.Fprintln(stderr, "peer:", err)
		return run.ExitFailed
	}
	r := &run.Report{W: stdout}
	fmt.Fprintf(stdout, "peer: backend %s, %d device(s)\n", be.Name(), n)
	m := vmm.New(be)
	stripe(r, m, n)
	share(r, m, be, n)
	return r.Exit()
}

func stripe(r *run.Report, m *vmm.Manager, n int) {
	devs := make([]int, n)
	for i := range devs {
		devs[i] = i
	}
	size := uint64(n) * 6 * mib
	st, err := peer.Stripe(m, size, devs, peer.StripeOptions{})
	if !r.Check(err, "stripe %s over devices %v, every device granted read-write in one call", units.Size(size), devs) {
		return
	}
	defer func() { r.Check(st.Close(), "close the striped range") }()
	for _, s := range st.Stripes() {
		r.Note("stripe at +%s: %s on device %d", units.Size(s.Offset), units.Size(s.Size), s.Device)
	}
	want := pattern.Bytes(1, int(st.Size()))
	if _, err := st.From(n-1).WriteAt(want, 0); !r.Check(err, "device %d writes the whole range", n-1) {
		return
	}
	for _, d := range devs {
		got := make([]byte, len(want))
		if _, err := st.From(d).ReadAt(got, 0); err != nil || !bytes.Equal(want, got) {
			r.Fail("device %d reads the whole range back: %v", d, err)
			continue
		}
		r.OK("device %d reads every stripe back", d)
	}
}

func share(r *run.Report, m *vmm.Manager, be vmm.Backend, n int) {
	p, err := peer.New(m, 0, 4*mib)
	if !r.Check(err, "4 MiB on device 0, mapped once") {
		return
	}
	defer func() { r.Check(p.Close(), "close the shared memory") }()
	want := pattern.Bytes(2, 4*mib)
	if _, err := p.WriteAt(want, 0); !r.Check(err, "device 0 writes it") {
		return
	}
	if n < 2 {
		r.Note("one device: peer grants not exercised")
		return
	}
	var rw, ro []int
	for d := 1; d < n; d++ {
		if d%2 == 1 {
			rw = append(rw, d)
		} else {
			ro = append(ro, d)
		}
	}
	if err := p.Grant(peer.ReadWrite, rw...); errors.Is(err, peer.ErrNoPeerAccess) {
		r.Note("no peer access between these devices (%v): grants skipped", err)
		return
	} else if !r.Check(err, "grant read-write to %v in one call", rw) {
		return
	}
	if len(ro) > 0 && !r.Check(p.Grant(peer.ReadOnly, ro...), "grant read-only to %v in one call", ro) {
		return
	}
	got := make([]byte, len(want))
	for d := 1; d < n; d++ {
		if _, err := p.From(d).ReadAt(got, 0); err != nil || !bytes.Equal(want, got) {
			r.Fail("device %d reads device 0's memory: %v", d, err)
		} else {
			r.OK("device %d reads device 0's memory at the same address %v", d, p.Base())
		}
		f, err := p.Access(d)
		wantF := cu.MEM_ACCESS_FLAGS_PROT_READWRITE
		if d%2 == 0 {
			wantF = cu.MEM_ACCESS_FLAGS_PROT_READ
		}
		if err != nil || f != wantF {
			r.Fail("device %d access is %d, want %d (%v)", d, f, wantF, err)
		}
	}
	if _, err := p.From(rw[0]).WriteAt([]byte("peer write"), 0); r.Check(err, "device %d (read-write) writes", rw[0]) {
		_, _ = p.ReadAt(got[:10], 0)
		if string(got[:10]) == "peer write" {
			r.OK("device 0 sees device %d's write", rw[0])
		} else {
			r.Fail("device 0 does not see device %d's write", rw[0])
		}
	}
	if len(ro) > 0 {
		if _, err := p.From(ro[0]).WriteAt([]byte("x"), 0); err != nil {
			r.OK("device %d (read-only) may not write: %s", ro[0], resultName(err))
		} else {
			r.Fail("device %d wrote read-only memory", ro[0])
		}
	}
	if r.Check(p.Revoke(rw...), "revoke %v", rw) {
		if _, err := p.From(rw[0]).ReadAt(got, 0); err != nil {
			r.OK("device %d may no longer read", rw[0])
		} else {
			r.Fail("device %d still reads after revoke", rw[0])
		}
	}
}

func resultName(err error) string {
	if res, ok := cu.ResultOf(err); ok {
		return res.Name()
	}
	return err.Error()
}
