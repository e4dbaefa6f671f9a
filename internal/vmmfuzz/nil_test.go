package vmmfuzz_test

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/ipc/pidfd"
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
// bug they show, while a package this harness does not change is fixed. The harness logs
// their failures instead of failing; TestNilInputs skips them, and fails once one passes,
// so that its entry is deleted. Empty: the 55 cases that panicked when the harness was
// written (issue 14, item 4, and zero-value blocks) pass since the typed layer's rework.
var knownBugs = map[string]string{}

const g2 = 2 * mib

// accessor wraps calls that return no error: they only must not panic.
func accessor(f func()) func(*world) error { return func(*world) error { f(); return nil } }

// firstErr runs fs and returns the first error, for a case of several calls.
func firstErr(errs ...error) error { return errors.Join(errs...) }

// w0closed closes what a call that needs no world returned, if it succeeded.
func w0closed(r *ipc.Received, err error) error {
	if err == nil {
		r.Close()
	}
	return err
}

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

// withMulticast runs f with a fresh 2-device multicast object of the Sim under test,
// closed afterwards.
func withMulticast(f func(w *world, mc *vmm.Multicast) error) func(*world) error {
	return func(w *world) error {
		mc, err := w.m.CreateMulticast(vmm.MulticastProps{Devices: 2, Size: g2})
		if err != nil {
			return errSetup
		}
		put(w, &w.closers, io.Closer(mc))
		defer mc.Close()
		return f(w, mc)
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
		addr   = cu.DevicePtr(0x302000000)
	)
	cs := []nilCase{}
	add := func(name string, words []string, mayPass bool, fn func(*world) error) {
		cs = append(cs, nilCase{name, words, mayPass, fn})
	}
	w1 := func(w ...string) []string { return w }

	for _, mm := range []struct {
		name string
		mk   func() *vmm.Manager
	}{
		{"nil Manager", func() *vmm.Manager { return nil }},
		{"zero Manager", func() *vmm.Manager { return &vmm.Manager{} }},
		{"Manager of a nil Backend", func() *vmm.Manager { return vmm.New(nil) }},
		{"Manager of a nil *sim.Sim", func() *vmm.Manager { return vmm.New((*sim.Sim)(nil)) }},
	} {
		mk, n := mm.mk, mm.name+": "
		add(n+"Create", w1("create"), false, func(w *world) error { return w.closed(mk().Create(g2, props)) })
		add(n+"Reserve", w1("reserve"), false, func(w *world) error { return w.closed(mk().Reserve(g2)) })
		add(n+"Granularity", w1("granularity"), false, func(*world) error { _, err := mk().Granularity(props, false); return err })
		add(n+"Retain", w1("retain"), false, func(w *world) error { return w.closed(mk().Retain(addr)) })
		add(n+"ImportFD", w1("import"), false, func(w *world) error { return w.closed(mk().ImportFD(otherFD(), g2)) })
		add(n+"ImportFabric", w1("import"), false, func(w *world) error { return w.closed(mk().ImportFabric(fabric, g2)) })
		add(n+"WriteAt", w1("write"), false, func(*world) error { return mk().WriteAt(0, p, addr) })
		add(n+"ReadAt", w1("read"), false, func(*world) error { return mk().ReadAt(0, p, addr) })
		add(n+"Copy", w1("copy"), false, func(*world) error { return mk().Copy(0, addr, addr+g2, 8) })
		add(n+"Fill", w1("fill", "memset"), false, func(*world) error { return mk().Fill(0, addr, 1, 8) })
		add(n+"Attribute", w1("attribute"), false, func(*world) error {
			_, err := mk().Attribute(0, cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
			return err
		})
		add(n+"CanAccessPeer", w1("peer"), false, func(*world) error { _, err := mk().CanAccessPeer(0, 1); return err })
		add(n+"Device", w1("device"), false, func(*world) error { _, err := mk().Device(0); return err })
		add(n+"DeviceCount", w1("device"), false, func(*world) error { _, err := mk().DeviceCount(); return err })
		add(n+"DriverVersion", w1("driver", "version"), false, func(*world) error { _, err := mk().DriverVersion(); return err })
		add(n+"CheckProps", w1("check", "props", "properties", "attribute"), false, func(*world) error {
			return mk().CheckProps(vmm.Props{Location: vmm.OnDevice(0), Compressible: true}, 0)
		})
		add(n+"MulticastGranularity", w1("granularity"), false, func(*world) error {
			_, err := mk().MulticastGranularity(vmm.MulticastProps{Devices: 2, Size: g2}, false)
			return err
		})
		add(n+"CreateMulticast", w1("multicast"), false, func(w *world) error {
			return w.closed(mk().CreateMulticast(vmm.MulticastProps{Devices: 2, Size: g2}))
		})
		add(n+"Tx.Create", w1("create"), false, func(w *world) error {
			tx := mk().Begin(nil)
			a, err := tx.Create(g2, props)
			if err != nil {
				return tx.Rollback(err)
			}
			tx.Commit()
			return w.closed(a, nil)
		})
		add(n+"Backend, Name", nil, true, accessor(func() { _, _ = mk().Backend(), mk().Name() }))
		add(n+"buffer.New", w1("new"), false, func(w *world) error { return w.closed(buffer.New(mk(), g2, buffer.Options{})) })
		add(n+"sparse.New", w1("new"), false, func(w *world) error { return w.closed(sparse.New(mk(), g2, sparse.Options{})) })
		add(n+"peer.New", w1("new"), false, func(w *world) error { return w.closed(peer.New(mk(), 0, g2)) })
		add(n+"peer.Stripe", w1("stripe"), false, func(w *world) error {
			return w.closed(peer.Stripe(mk(), g2, []int{0}, peer.StripeOptions{}))
		})
		add(n+"ipc.Export", w1("export"), false, func(w *world) error {
			return withAlloc(func(w *world, a *vmm.Allocation) error { return w.closed(ipc.Export(mk(), a)) })(w)
		})
		add(n+"FabricHandle.Import", w1("import"), false, func(w *world) error {
			return w.closed(ipc.FabricHandle{Size: g2}.Import(mk()))
		})
		add(n+"ipc.ImportFabric", w1("import"), false, func(w *world) error {
			return w.closed(ipc.ImportFabric(mk(), []ipc.FabricHandle{{Size: g2}}, nil))
		})
	}

	for _, aa := range []struct {
		name string
		mk   func() *vmm.Allocation
	}{{"nil Allocation", func() *vmm.Allocation { return nil }}, {"zero Allocation", func() *vmm.Allocation { return &vmm.Allocation{} }}} {
		mk, n := aa.mk, aa.name+": "
		add(n+"Handle, Size", nil, true, accessor(func() { _, _ = mk().Handle(), mk().Size() }))
		add(n+"Properties", w1("properties"), false, func(*world) error { _, err := mk().Properties(); return err })
		add(n+"Compressible", w1("properties", "compressible"), false, func(*world) error { _, err := mk().Compressible(); return err })
		add(n+"ExportFD", w1("export"), false, func(*world) error {
			fd, err := mk().ExportFD()
			if err == nil {
				closeFD(fd)
			}
			return err
		})
		add(n+"ExportFabric", w1("export"), false, func(*world) error { _, err := mk().ExportFabric(); return err })
		add(n+"Close", w1("release", "close"), true, func(*world) error { return mk().Close() })
		add(n+"Reservation.Map", w1("map"), false, withResv(func(w *world, r *vmm.Reservation) error { return w.closed(r.Map(0, mk())) }))
		add(n+"Tx.Map", w1("map"), false, withResv(func(w *world, r *vmm.Reservation) error {
			tx := w.m.Begin(nil)
			mp, err := tx.Map(r, 0, mk())
			if err != nil {
				return tx.Rollback(err)
			}
			tx.Commit()
			return w.closed(mp, nil)
		}))
		add(n+"Multicast.Bind", w1("bind"), false, withMulticast(func(w *world, mc *vmm.Multicast) error { return mc.Bind(0, mk(), 0, g2) }))
		add(n+"ipc.Export", w1("export"), false, func(w *world) error { return w.closed(ipc.Export(w.m, mk())) })
		add(n+"ipc.ExportFabric", w1("export"), false, func(*world) error { _, err := ipc.ExportFabric(mk()); return err })
	}

	for _, rr := range []struct {
		name string
		mk   func() *vmm.Reservation
	}{{"nil Reservation", func() *vmm.Reservation { return nil }}, {"zero Reservation", func() *vmm.Reservation { return &vmm.Reservation{} }}} {
		mk, n := rr.mk, rr.name+": "
		add(n+"Base, Size, Contains", nil, true, accessor(func() { _, _, _ = mk().Base(), mk().Size(), mk().Contains(addr, 1) }))
		add(n+"Map", w1("map"), false, withAlloc(func(w *world, a *vmm.Allocation) error { return w.closed(mk().Map(0, a)) }))
		add(n+"MapMulticast", w1("map"), false, withMulticast(func(w *world, mc *vmm.Multicast) error { return w.closed(mk().MapMulticast(0, mc)) }))
		add(n+"From(0).WriteAt", w1("write"), false, func(*world) error { _, err := mk().From(0).WriteAt(p, 0); return err })
		add(n+"From(0).ReadAt", w1("read"), false, func(*world) error { _, err := mk().From(0).ReadAt(p, 0); return err })
		add(n+"SetAccess", w1("set access", "access"), false, func(*world) error { return mk().SetAccess(0, g2, vmm.ReadWrite(0)...) })
		add(n+"Unmap", w1("unmap"), false, func(*world) error { return mk().Unmap(0, g2) })
		add(n+"Close", w1("free", "unmap", "close"), true, func(*world) error { return mk().Close() })
		add(n+"Tx.Map", w1("map"), false, withAlloc(func(w *world, a *vmm.Allocation) error {
			tx := w.m.Begin(nil)
			mp, err := tx.Map(mk(), 0, a)
			if err != nil {
				return tx.Rollback(err)
			}
			tx.Commit()
			return w.closed(mp, nil)
		}))
	}

	for _, mm := range []struct {
		name string
		mk   func() *vmm.Mapping
	}{{"nil Mapping", func() *vmm.Mapping { return nil }}, {"zero Mapping", func() *vmm.Mapping { return &vmm.Mapping{} }}} {
		mk, n := mm.mk, mm.name+": "
		add(n+"Addr, Size", nil, true, accessor(func() { _, _ = mk().Addr(), mk().Size() }))
		add(n+"SetAccess", w1("set access", "access"), false, func(*world) error { return mk().SetAccess(vmm.ReadWrite(0)...) })
		add(n+"Access", w1("access"), false, func(*world) error { _, err := mk().Access(0); return err })
		add(n+"Close", w1("unmap", "close"), true, func(*world) error { return mk().Close() })
	}

	for _, mm := range []struct {
		name string
		mk   func() *vmm.Multicast
	}{{"nil Multicast", func() *vmm.Multicast { return nil }}, {"zero Multicast", func() *vmm.Multicast { return &vmm.Multicast{} }}} {
		mk, n := mm.mk, mm.name+": "
		add(n+"Handle, Size", nil, true, accessor(func() { _, _ = mk().Handle(), mk().Size() }))
		add(n+"AddDevice", w1("add device", "device"), false, func(*world) error { return mk().AddDevice(0) })
		add(n+"Bind", w1("bind"), false, withAlloc(func(w *world, a *vmm.Allocation) error { return mk().Bind(0, a, 0, g2) }))
		add(n+"BindAddress", w1("bind"), false, func(*world) error { return mk().BindAddress(0, addr, 0, g2) })
		add(n+"BindFor", w1("bind"), false, withAlloc(func(w *world, a *vmm.Allocation) error { return mk().BindFor(0, 0, a, 0, g2) }))
		add(n+"Unbind", w1("unbind"), false, func(*world) error { return mk().Unbind(0, 0, g2) })
		add(n+"Close", w1("release", "close"), true, func(*world) error { return mk().Close() })
		add(n+"Reservation.MapMulticast", w1("map"), false, withResv(func(w *world, r *vmm.Reservation) error { return w.closed(r.MapMulticast(0, mk())) }))
	}

	for _, bb := range []struct {
		name string
		mk   func() *buffer.Buffer
	}{{"nil Buffer", func() *buffer.Buffer { return nil }}, {"zero Buffer", func() *buffer.Buffer { return &buffer.Buffer{} }}} {
		mk, n := bb.mk, bb.name+": "
		add(n+"accessors", nil, true, accessor(func() {
			_, _, _, _, _, _ = mk().Base(), mk().Size(), mk().Granularity(), mk().Stats(), mk().Chunks(), mk().Config()
		}))
		add(n+"Grow", w1("grow"), false, func(*world) error { return mk().Grow(g2) })
		add(n+"Shrink", w1("shrink"), false, func(*world) error { return mk().Shrink(0) })
		add(n+"ReadAt", w1("read"), false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(n+"WriteAt", w1("write"), false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(n+"SetConfig", w1("config"), false, func(*world) error { return mk().SetConfig(buffer.Config{}) })
		add(n+"Close", w1("close"), true, func(*world) error { return mk().Close() })
	}

	for _, ss := range []struct {
		name string
		mk   func() *sparse.Array
	}{{"nil Array", func() *sparse.Array { return nil }}, {"zero Array", func() *sparse.Array { return &sparse.Array{} }}} {
		mk, n := ss.mk, ss.name+": "
		add(n+"accessors", nil, true, accessor(func() {
			_, _, _, _, _, _ = mk().Base(), mk().Size(), mk().PageSize(), mk().Stats(), mk().CommittedRanges(), mk().Committed(0)
		}))
		add(n+"Commit", w1("commit"), false, func(*world) error { return mk().Commit(0, g2) })
		add(n+"Decommit", w1("decommit"), false, func(*world) error { return mk().Decommit(0, g2) })
		add(n+"ReadAt", w1("read"), false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(n+"WriteAt", w1("write"), false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(n+"Close", w1("close"), true, func(*world) error { return mk().Close() })
	}

	for _, pp := range []struct {
		name string
		mk   func() *peer.Memory
	}{{"nil Memory", func() *peer.Memory { return nil }}, {"zero Memory", func() *peer.Memory { return &peer.Memory{} }}} {
		mk, n := pp.mk, pp.name+": "
		add(n+"accessors", nil, true, accessor(func() { _, _, _, _, _ = mk().Base(), mk().Size(), mk().Owner(), mk().Handle(), mk().Grants() }))
		add(n+"Grant", w1("grant"), false, func(*world) error { return mk().Grant(peer.ReadWrite, 1) })
		add(n+"Revoke", w1("revoke"), false, func(*world) error { return mk().Revoke(1) })
		add(n+"ReadAt", w1("read"), false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(n+"WriteAt", w1("write"), false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(n+"From(1).ReadAt", w1("read"), false, func(*world) error { _, err := mk().From(1).ReadAt(p, 0); return err })
		add(n+"Access", w1("access"), false, func(*world) error { _, err := mk().Access(0); return err })
		add(n+"Close", w1("close"), true, func(*world) error { return mk().Close() })
	}

	for _, ss := range []struct {
		name string
		mk   func() *peer.Striped
	}{{"nil Striped", func() *peer.Striped { return nil }}, {"zero Striped", func() *peer.Striped { return &peer.Striped{} }}} {
		mk, n := ss.mk, ss.name+": "
		add(n+"accessors", nil, true, accessor(func() { _, _, _ = mk().Base(), mk().Size(), mk().Stripes() }))
		add(n+"ReadAt", w1("read"), false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(n+"WriteAt", w1("write"), false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(n+"From(1).WriteAt", w1("write"), false, func(*world) error { _, err := mk().From(1).WriteAt(p, 0); return err })
		add(n+"DeviceAt", w1("device at", "stripe"), false, func(*world) error { _, err := mk().DeviceAt(0); return err })
		add(n+"Close", w1("close"), true, func(*world) error { return mk().Close() })
	}
	add("zero vmm.View: ReadAt", w1("read"), false, func(*world) error { _, err := (vmm.View{}).ReadAt(p, 0); return err })
	add("zero vmm.View: WriteAt", w1("write"), false, func(*world) error { _, err := (vmm.View{}).WriteAt(p, 0); return err })

	for _, ee := range []struct {
		name string
		mk   func() *ipc.Exported
	}{{"nil Exported", func() *ipc.Exported { return nil }}, {"zero Exported", func() *ipc.Exported { return &ipc.Exported{} }}} {
		mk, n := ee.mk, ee.name+": "
		add(n+"FDs", nil, true, accessor(func() { _ = mk().FDs() }))
		add(n+"Close", w1("close"), true, func(*world) error { return mk().Close() })
		add(n+"Send", w1("send"), false, func(*world) error { return ipc.Send(nil, mk()) })
		add(n+"pidfd.Publish", w1("publish"), false, func(*world) error { _, err := pidfd.Publish(mk()); return err })
	}
	for _, rr := range []struct {
		name string
		mk   func() *ipc.Received
	}{{"nil Received", func() *ipc.Received { return nil }}, {"zero Received", func() *ipc.Received { return &ipc.Received{} }}} {
		mk, n := rr.mk, rr.name+": "
		add(n+"FDs", nil, true, accessor(func() { _ = mk().FDs() }))
		add(n+"Close", w1("close"), true, func(*world) error { return mk().Close() })
		add(n+"ipc.Import", w1("import"), false, func(w *world) error { return w.closed(ipc.Import(w.m, mk(), nil)) })
	}
	for _, ii := range []struct {
		name string
		mk   func() *ipc.Imported
	}{{"nil Imported", func() *ipc.Imported { return nil }}, {"zero Imported", func() *ipc.Imported { return &ipc.Imported{} }}} {
		mk, n := ii.mk, ii.name+": "
		add(n+"Base, Size", nil, true, accessor(func() { _, _ = mk().Base(), mk().Size() }))
		add(n+"ReadAt", w1("read"), false, func(*world) error { _, err := mk().ReadAt(p, 0); return err })
		add(n+"WriteAt", w1("write"), false, func(*world) error { _, err := mk().WriteAt(p, 0); return err })
		add(n+"Close", w1("close"), true, func(*world) error { return mk().Close() })
	}

	// Nil and empty arguments, with a working Manager.
	add("ipc.Export of no allocation", w1("export"), false, func(w *world) error { return w.closed(ipc.Export(w.m)) })
	add("ipc.ImportFabric of nothing", w1("import"), false, func(w *world) error { return w.closed(ipc.ImportFabric(w.m, nil, nil)) })
	add("ipc.Send and Receive on nil connections", w1("send", "receive"), false, func(*world) error {
		_, rerr := ipc.Receive(nil)
		_, ierr := ipc.ReceiveAndImport(nil, nil, nil)
		return firstErr(ipc.SendFDs(nil, ipc.Header{}, nil), rerr, ierr)
	})
	add("pidfd.Fetch of a zero Ticket", w1("fetch", "ticket"), false, func(*world) error { return w0closed(pidfd.Fetch(pidfd.Ticket{})) })
	add("pidfd.FetchAndImport of a zero Ticket", w1("fetch", "ticket"), false, func(w *world) error {
		return w.closed(pidfd.FetchAndImport(pidfd.Ticket{}, w.m, nil))
	})
	add("pidfd.ParseTicket of nothing", w1("ticket"), false, func(*world) error { _, err := pidfd.ParseTicket(""); return err })
	add("zero Pointer", nil, true, accessor(func() {
		var p vmm.Pointer
		_, _ = p.Share()
		_, _ = p.String(), p.AllowedHandleTypes()
	}))
	add("Manager.Pointer of nothing", w1("pointer"), true, func(w *world) error {
		_, err := w.m.Pointer(0)
		return err
	})
	add("peer.Stripe over no device", w1("stripe"), false, func(w *world) error {
		return w.closed(peer.Stripe(w.m, g2, nil, peer.StripeOptions{}))
	})
	add("Mapping.SetAccess with no descriptor", w1("set access", "access"), false, func(w *world) error {
		return withAlloc(func(w *world, a *vmm.Allocation) error {
			return withResv(func(w *world, r *vmm.Reservation) error {
				mp, err := r.Map(0, a)
				if err != nil {
					return errSetup
				}
				put(w, &w.maps, mp)
				defer mp.Close()
				return mp.SetAccess()
			})(w)
		})(w)
	})
	add("Reservation.SetAccess with no descriptor", w1("set access", "access"), false, withResv(func(w *world, r *vmm.Reservation) error {
		return r.SetAccess(0, g2)
	}))
	add("Tx of a nil Pending, rolled back twice", w1("create"), true, func(w *world) error {
		tx := w.m.Begin(nil)
		a, err := tx.Create(g2, props)
		if err != nil {
			return tx.Rollback(err)
		}
		put(w, &w.allocs, a) // closed by the teardown if an armed fault fails the rollback's
		cause := errors.New("cause")
		if err := tx.Rollback(cause); !errors.Is(err, cause) {
			return fmt.Errorf("vmm: create: rollback returned %v, not its cause", err)
		}
		tx.Rollback(cause)
		return nil
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
	if trace != nil {
		trace("nil case "+c.name, nil)
	}
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
