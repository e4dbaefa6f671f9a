package vmmfuzz_test

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/peer"
	"github.com/cuvmm/cuvmm/vmm/sparse"
)

// nilCase is one call with a nil or zero-value receiver or argument: it must not panic,
// and must fail with a descriptive error unless it is an accessor or a Close (mayPass).
type nilCase struct {
	name    string
	words   []string // the operation, as its error names it
	mayPass bool
	fn      func(w *world) error
}

// knownBugs are the nil cases that fail today (they panic, or succeed), by name, with the
// bug they show; the fix of each belongs to a package this harness does not change. The
// harness logs their failures instead of failing; TestNilInputs skips them, and fails once
// one passes, so that its entry is deleted.
var knownBugs = func() map[string]string {
	const (
		item4  = "issue 14 item 4: the typed layer panics on nil inputs"
		zeroP  = "a zero-value block panics: it dereferences the Backend no constructor set"
		zeroOK = "a zero-value Buffer (no constructor made it) accepts Shrink"
	)
	bugs := map[string]string{}
	for _, m := range []string{"nil Manager", "Manager of a nil Backend", "zero Manager"} {
		for _, op := range []string{"Create", "Reserve", "Granularity", "Retain", "ImportFD", "ImportFabric", "CopyIn", "CopyOut"} {
			bugs[m+": "+op] = item4
		}
	}
	for _, c := range []string{
		"nil Manager: Backend",
		"nil Allocation: Handle, Size", "nil Allocation: Properties", "nil Allocation: Compressible",
		"nil Allocation: ExportFD", "nil Allocation: ExportFabric", "nil Allocation: Close",
		"nil Allocation: Reservation.Map",
		"zero Allocation: Properties", "zero Allocation: Compressible", "zero Allocation: ExportFD",
		"zero Allocation: ExportFabric", "zero Allocation: Close", "zero Allocation: ipc.ExportFabric",
		"nil Reservation: Base, Size", "nil Reservation: Map", "nil Reservation: Close", "zero Reservation: Close",
		"nil Mapping: Addr, Size", "nil Mapping: SetAccess", "nil Mapping: Access", "nil Mapping: Close",
		"zero Mapping: SetAccess", "zero Mapping: Access", "zero Mapping: Close",
	} {
		bugs[c] = item4
	}
	for _, c := range []string{
		"zero Array: Close",
		"zero Memory: Grant", "zero Memory: Revoke", "zero Memory: Access", "zero Memory: Close",
		"zero Striped: Close",
	} {
		bugs[c] = zeroP
	}
	bugs["zero Buffer: Shrink"] = zeroOK
	return bugs
}()

const g2 = 2 * mib

// accessor wraps calls that return no error: they only must not panic.
func accessor(f func()) func(*world) error { return func(*world) error { f(); return nil } }

// firstErr runs fs and returns the first error, for a case of several calls.
func firstErr(errs ...error) error { return errors.Join(errs...) }

// errSetup is what a case returns when it could not make the objects it needs (a fault
// armed by another worker): it checks nothing then.
var errSetup = errors.New("setup failed")

// withResv runs f with a fresh 2 MiB reservation of the Sim under test, closed afterwards.
func withResv(f func(w *world, r *vmm.Reservation) error) func(*world) error {
	return func(w *world) error {
		r, err := w.m.Reserve(g2)
		if err != nil {
			return errSetup // an armed fault
		}
		put(w, &w.resvs, r) // closed by the teardown if an armed fault fails this Close
		defer r.Close()
		return f(w, r)
	}
}

// withAlloc runs f with a fresh 2 MiB allocation of the Sim under test, closed afterwards.
func withAlloc(f func(w *world, a *vmm.Allocation) error) func(*world) error {
	return func(w *world) error {
		a, err := w.m.Create(g2, vmm.DeviceProps(0))
		if err != nil {
			return errSetup
		}
		put(w, &w.allocs, a)
		defer a.Close()
		return f(w, a)
	}
}

// closed closes what a constructor returned, if it succeeded, and returns its error. The
// object joins the world's pool too, for the teardown to close if an armed fault fails
// this Close.
func (w *world) closed(x io.Closer, err error) error {
	if err == nil {
		put(w, &w.closers, x)
		x.Close()
	}
	return err
}

var nilCases = func() []nilCase {
	var (
		props  = vmm.DeviceProps(0)
		fabric = cu.MemFabricHandle{}
		p      = make([]byte, 8)
	)
	cs := []nilCase{}
	add := func(name string, words []string, mayPass bool, fn func(*world) error) {
		cs = append(cs, nilCase{name, words, mayPass, fn})
	}
	for _, mm := range []struct {
		name string
		mk   func() *vmm.Manager
	}{{"nil Manager", func() *vmm.Manager { return nil }}, {"Manager of a nil Backend", func() *vmm.Manager { return vmm.New(nil) }}, {"zero Manager", func() *vmm.Manager { return &vmm.Manager{} }}} {
		mk := mm.mk
		add(mm.name+": Create", []string{"create"}, false, func(w *world) error { return w.closed(mk().Create(g2, props)) })
		add(mm.name+": Reserve", []string{"reserve"}, false, func(w *world) error { return w.closed(mk().Reserve(g2)) })
		add(mm.name+": Granularity", []string{"granularity"}, false, func(*world) error { _, err := mk().Granularity(props, false); return err })
		add(mm.name+": Retain", []string{"retain"}, false, func(w *world) error { return w.closed(mk().Retain(0x302000000)) })
		add(mm.name+": ImportFD", []string{"import"}, false, func(w *world) error { return w.closed(mk().ImportFD(otherFD(), g2)) })
		add(mm.name+": ImportFabric", []string{"import"}, false, func(w *world) error { return w.closed(mk().ImportFabric(fabric, g2)) })
		add(mm.name+": CopyIn", []string{"copy in"}, false, func(*world) error { return mk().CopyIn(0, 0x302000000, p) })
		add(mm.name+": CopyOut", []string{"copy out"}, false, func(*world) error { return mk().CopyOut(0, p, 0x302000000) })
		add(mm.name+": Backend", nil, true, accessor(func() { _ = mk().Backend() }))
		add(mm.name+": buffer.New", []string{"new"}, false, func(w *world) error { return w.closed(buffer.New(mk(), g2, buffer.Options{})) })
		add(mm.name+": sparse.New", []string{"new"}, false, func(w *world) error { return w.closed(sparse.New(mk(), g2, sparse.Options{})) })
		add(mm.name+": peer.New", []string{"new"}, false, func(w *world) error { return w.closed(peer.New(mk(), 0, g2)) })
		add(mm.name+": peer.Stripe", []string{"stripe"}, false, func(w *world) error {
			return w.closed(peer.Stripe(mk(), g2, []int{0}, peer.StripeOptions{}))
		})
		add(mm.name+": ipc.Export", []string{"export"}, false, func(w *world) error {
			return withAlloc(func(w *world, a *vmm.Allocation) error { return w.closed(ipc.Export(mk(), a)) })(w)
		})
		add(mm.name+": ipc.ExportHandles", []string{"export"}, false, func(w *world) error {
			return w.closed(ipc.ExportHandles(mk(), []cu.MemHandle{1}, []uint64{g2}))
		})
		add(mm.name+": FabricHandle.Import", []string{"import"}, false, func(w *world) error {
			return w.closed(ipc.FabricHandle{Size: g2}.Import(mk()))
		})
		add(mm.name+": ipc.ImportFabric", []string{"import"}, false, func(w *world) error {
			return w.closed(ipc.ImportFabric(mk(), []ipc.FabricHandle{{Size: g2}}, nil))
		})
		add(mm.name+": ipc.Import", []string{"import"}, false, func(w *world) error {
			return w.closed(ipc.Import(mk(), &ipc.Received{Header: ipc.Header{HandleType: 1, Granularity: g2, Sizes: []uint64{g2}}}, nil))
		})
	}

	for _, aa := range []struct {
		name string
		mk   func() *vmm.Allocation
	}{{"nil Allocation", func() *vmm.Allocation { return nil }}, {"zero Allocation", func() *vmm.Allocation { return &vmm.Allocation{} }}} {
		mk := aa.mk
		add(aa.name+": Handle, Size", nil, true, accessor(func() { _, _ = mk().Handle(), mk().Size() }))
		add(aa.name+": Properties", []string{"properties"}, false, func(*world) error { _, err := mk().Properties(); return err })
		add(aa.name+": Compressible", []string{"properties", "compressible"}, false, func(*world) error { _, err := mk().Compressible(); return err })
		add(aa.name+": ExportFD", []string{"export"}, false, func(*world) error {
			fd, err := mk().ExportFD()
			if err == nil {
				closeFD(fd)
			}
			return err
		})
		add(aa.name+": ExportFabric", []string{"export"}, false, func(*world) error { _, err := mk().ExportFabric(); return err })
		add(aa.name+": Close", []string{"release", "close"}, true, func(*world) error { return mk().Close() })
		add(aa.name+": Reservation.Map", []string{"map"}, false, withResv(func(w *world, r *vmm.Reservation) error { return w.closed(r.Map(0, mk(), 0, g2)) }))
		add(aa.name+": ipc.Export", []string{"export"}, false, func(w *world) error { return w.closed(ipc.Export(w.m, mk())) })
		add(aa.name+": ipc.ExportFabric", []string{"export"}, false, func(*world) error { _, err := ipc.ExportFabric(mk()); return err })
	}

	for _, rr := range []struct {
		name string
		mk   func() *vmm.Reservation
	}{{"nil Reservation", func() *vmm.Reservation { return nil }}, {"zero Reservation", func() *vmm.Reservation { return &vmm.Reservation{} }}} {
		mk := rr.mk
		add(rr.name+": Base, Size", nil, true, accessor(func() { _, _ = mk().Base(), mk().Size() }))
		add(rr.name+": Map", []string{"map"}, false, withAlloc(func(w *world, a *vmm.Allocation) error { return w.closed(mk().Map(0, a, 0, g2)) }))
		add(rr.name+": Close", []string{"free", "unmap", "close"}, true, func(*world) error { return mk().Close() })
	}

	for _, mm := range []struct {
		name string
		mk   func() *vmm.Mapping
	}{{"nil Mapping", func() *vmm.Mapping { return nil }}, {"zero Mapping", func() *vmm.Mapping { return &vmm.Mapping{} }}} {
		mk := mm.mk
		add(mm.name+": Addr, Size", nil, true, accessor(func() { _, _ = mk().Addr(), mk().Size() }))
		add(mm.name+": SetAccess", []string{"set access"}, false, func(*world) error { return mk().SetAccess(vmm.ReadWrite(0)...) })
		add(mm.name+": Access", []string{"access"}, false, func(*world) error { _, err := mk().Access(0); return err })
		add(mm.name+": Close", []string{"unmap", "close"}, true, func(*world) error { return mk().Close() })
	}

	for _, bb := range []struct {
		name string
		mk   func() *buffer.Buffer
	}{{"nil Buffer", func() *buffer.Buffer { return nil }}, {"zero Buffer", func() *buffer.Buffer { return &buffer.Buffer{} }}} {
		mk := bb.mk
		add(bb.name+": accessors", nil, true, accessor(func() { _, _, _, _, _ = mk().Base(), mk().Size(), mk().Granularity(), mk().Stats(), mk().Chunks() }))
		add(bb.name+": Grow", []string{"grow"}, false, func(*world) error { return mk().Grow(g2) })
		add(bb.name+": Shrink", []string{"shrink"}, false, func(*world) error { return mk().Shrink(0) })
		add(bb.name+": ReadAt", []string{"read"}, false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(bb.name+": WriteAt", []string{"write"}, false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(bb.name+": Close", []string{"close"}, true, func(*world) error { return mk().Close() })
	}

	for _, ss := range []struct {
		name string
		mk   func() *sparse.Array
	}{{"nil Array", func() *sparse.Array { return nil }}, {"zero Array", func() *sparse.Array { return &sparse.Array{} }}} {
		mk := ss.mk
		add(ss.name+": accessors", nil, true, accessor(func() {
			_, _, _, _, _, _ = mk().Base(), mk().Size(), mk().PageSize(), mk().Stats(), mk().CommittedRanges(), mk().Committed(0)
		}))
		add(ss.name+": Commit", []string{"commit"}, false, func(*world) error { return mk().Commit(0, g2) })
		add(ss.name+": Decommit", []string{"decommit"}, false, func(*world) error { return mk().Decommit(0, g2) })
		add(ss.name+": ReadAt", []string{"read"}, false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(ss.name+": WriteAt", []string{"write"}, false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(ss.name+": Close", []string{"close"}, true, func(*world) error { return mk().Close() })
	}

	for _, pp := range []struct {
		name string
		mk   func() *peer.Memory
	}{{"nil Memory", func() *peer.Memory { return nil }}, {"zero Memory", func() *peer.Memory { return &peer.Memory{} }}} {
		mk := pp.mk
		add(pp.name+": accessors", nil, true, accessor(func() { _, _, _, _, _ = mk().Base(), mk().Size(), mk().Owner(), mk().Handle(), mk().Grants() }))
		add(pp.name+": Grant", []string{"grant"}, false, func(*world) error { return mk().Grant(peer.ReadWrite, 1) })
		add(pp.name+": Revoke", []string{"revoke"}, false, func(*world) error { return mk().Revoke(1) })
		add(pp.name+": CopyIn", []string{"copy in"}, false, func(*world) error { return mk().CopyIn(0, 0, p) })
		add(pp.name+": CopyOut", []string{"copy out"}, false, func(*world) error { return mk().CopyOut(0, p, 0) })
		add(pp.name+": Access", []string{"access"}, false, func(*world) error { _, err := mk().Access(0); return err })
		add(pp.name+": Close", []string{"close"}, true, func(*world) error { return mk().Close() })
	}

	for _, ss := range []struct {
		name string
		mk   func() *peer.Striped
	}{{"nil Striped", func() *peer.Striped { return nil }}, {"zero Striped", func() *peer.Striped { return &peer.Striped{} }}} {
		mk := ss.mk
		add(ss.name+": accessors", nil, true, accessor(func() { _, _, _ = mk().Base(), mk().Size(), mk().Stripes() }))
		add(ss.name+": CopyIn", []string{"copy in"}, false, func(*world) error { return mk().CopyIn(0, 0, p) })
		add(ss.name+": CopyOut", []string{"copy out"}, false, func(*world) error { return mk().CopyOut(0, p, 0) })
		add(ss.name+": DeviceAt", []string{"device at", "stripe"}, false, func(*world) error { _, err := mk().DeviceAt(0); return err })
		add(ss.name+": Close", []string{"close"}, true, func(*world) error { return mk().Close() })
	}

	for _, ee := range []struct {
		name string
		mk   func() *ipc.Exported
	}{{"nil Exported", func() *ipc.Exported { return nil }}, {"zero Exported", func() *ipc.Exported { return &ipc.Exported{} }}} {
		mk := ee.mk
		add(ee.name+": FDs", nil, true, accessor(func() { _ = mk().FDs() }))
		add(ee.name+": Close", []string{"close"}, true, func(*world) error { return mk().Close() })
		add(ee.name+": Send", []string{"send"}, false, func(*world) error { return ipc.Send(nil, mk()) })
	}
	for _, rr := range []struct {
		name string
		mk   func() *ipc.Received
	}{{"nil Received", func() *ipc.Received { return nil }}, {"zero Received", func() *ipc.Received { return &ipc.Received{} }}} {
		mk := rr.mk
		add(rr.name+": FDs", nil, true, accessor(func() { _ = mk().FDs() }))
		add(rr.name+": Close", []string{"close"}, true, func(*world) error { return mk().Close() })
		add(rr.name+": ipc.Import", []string{"import"}, false, func(w *world) error { return w.closed(ipc.Import(w.m, mk(), nil)) })
	}
	for _, ii := range []struct {
		name string
		mk   func() *ipc.Imported
	}{{"nil Imported", func() *ipc.Imported { return nil }}, {"zero Imported", func() *ipc.Imported { return &ipc.Imported{} }}} {
		mk := ii.mk
		add(ii.name+": Base, Size", nil, true, accessor(func() { _, _ = mk().Base(), mk().Size() }))
		add(ii.name+": ReadAt", []string{"read"}, false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(ii.name+": WriteAt", []string{"write"}, false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(ii.name+": Close", []string{"close"}, true, func(*world) error { return mk().Close() })
	}

	// Nil arguments to functions of the blocks, with a working Manager.
	add("ipc.Export of no allocation", []string{"export"}, true, func(w *world) error { return w.closed(ipc.Export(w.m)) })
	add("ipc.ExportHandles of nothing", []string{"export"}, true, func(w *world) error { return w.closed(ipc.ExportHandles(w.m, nil, nil)) })
	add("ipc.ImportFabric of nothing", []string{"import"}, true, func(w *world) error { return w.closed(ipc.ImportFabric(w.m, nil, nil)) })
	add("ipc.Send and Receive on nil connections", []string{"send", "receive"}, false, func(*world) error {
		_, rerr := ipc.Receive(nil)
		_, ierr := ipc.ReceiveAndImport(nil, nil, nil)
		return firstErr(ipc.SendFDs(nil, ipc.Header{}, nil), rerr, ierr)
	})
	add("peer.Stripe over no device", []string{"stripe"}, false, func(w *world) error {
		return w.closed(peer.Stripe(w.m, g2, nil, peer.StripeOptions{}))
	})
	add("Mapping.SetAccess with no descriptor", []string{"set access"}, false, func(w *world) error {
		return withAlloc(func(w *world, a *vmm.Allocation) error {
			return withResv(func(w *world, r *vmm.Reservation) error {
				mp, err := r.Map(0, a, 0, g2)
				if err != nil {
					return errSetup
				}
				put(w, &w.maps, mp)
				defer mp.Close()
				return mp.SetAccess()
			})(w)
		})(w)
	})
	return cs
}()

// runNil runs a nil case and checks that its error, if any, is descriptive. It returns
// what else went wrong: a panic, with its stack, or a success where an error was due.
func (w *world) runNil(c nilCase) (problem string) {
	defer func() {
		if r := recover(); r != nil {
			problem = fmt.Sprintf("panicked: %v\n%s", r, debug.Stack())
		}
	}()
	err := c.fn(w)
	if errors.Is(err, errSetup) {
		return ""
	}
	if err == nil && !c.mayPass {
		return "succeeded"
	}
	w.check(c.name, err, c.words...)
	return ""
}

// nilInput is the harness's operation: one nil case, alongside the other workers. The
// failures of knownBugs are logged, not failed.
func (w *world) nilInput(a *args) {
	c := nilCases[a.n(len(nilCases))]
	problem := w.runNil(c)
	if problem == "" {
		return
	}
	if bug, ok := knownBugs[c.name]; ok {
		w.mu.Lock()
		w.known[c.name+": "+bug]++
		w.mu.Unlock()
		return
	}
	w.errorf("%s: %s", c.name, problem)
}

// TestNilInputs runs every nil case once, alone, on a fresh Sim.
func TestNilInputs(t *testing.T) {
	for _, c := range nilCases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, decode(nil))
			defer w.teardown()
			problem := w.runNil(c)
			bug, known := knownBugs[c.name]
			switch {
			case problem != "" && known:
				t.Skipf("known bug, %s: %s", bug, firstLine(problem))
			case problem != "":
				t.Error(problem)
			case known:
				t.Errorf("listed in knownBugs (%s) but passes now: delete its entry", bug)
			}
		})
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
