package vmmfuzz_test

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/peer"
	"github.com/cuvmm/cuvmm/vmm/sparse"
)

// op is one operation a step may run; it reads its arguments from a.
type op struct {
	name string
	fn   func(w *world, a *args)
}

// ops are the operations, by a step's first byte (modulo their number). Some appear twice
// so that programs make objects about as often as they use them.
var ops = []op{
	// The typed layer.
	{"Manager.Create", (*world).create},
	{"Manager.Create", (*world).create},
	{"Manager.Retain", (*world).retain},
	{"Manager.ImportFD", (*world).importFD},
	{"Manager.ImportFabric", (*world).importFabric},
	{"Manager.Granularity", (*world).granularity},
	{"Manager.WriteAt/ReadAt", (*world).managerCopy},
	{"Allocation queries", (*world).allocQuery},
	{"Allocation.ExportFD", (*world).allocExportFD},
	{"Allocation.ExportFabric", (*world).allocExportFabric},
	{"Allocation.Close", (*world).allocClose},
	{"Manager.Reserve", (*world).reserve},
	{"Manager.Reserve", (*world).reserve},
	{"Reservation.Map", (*world).mapTyped},
	{"Reservation.Map", (*world).mapTyped},
	{"Reservation.Map", (*world).mapTyped},
	{"Reservation.Close", (*world).resvClose},
	{"Mapping.SetAccess", (*world).setAccess},
	{"Mapping.Access", (*world).getAccess},
	{"Mapping.Close", (*world).mappingClose},
	{"Manager queries", (*world).managerQuery},
	{"Reservation copies, access, unmaps", (*world).resvOps},
	{"Manager.CreateMulticast", (*world).multicastCreate},
	{"Multicast ops", (*world).multicastOps},
	{"Multicast ops", (*world).multicastOps},
	{"Tx", (*world).tx},
	{"Manager.Pointer", (*world).pointer},
	// The building blocks.
	{"buffer.New", (*world).bufNew},
	{"Buffer.Grow/Shrink", (*world).bufResize},
	{"Buffer.ReadAt/WriteAt", (*world).bufCopy},
	{"Buffer.Close", (*world).bufClose},
	{"sparse.New", (*world).sparseNew},
	{"Array.Commit/Decommit", (*world).sparseCommit},
	{"Array.ReadAt/WriteAt", (*world).sparseCopy},
	{"Array.Close", (*world).sparseClose},
	{"peer.New", (*world).peerNew},
	{"Memory.Grant/Revoke", (*world).peerGrant},
	{"Memory copies", (*world).peerCopy},
	{"Memory.Close", (*world).peerClose},
	{"peer.Stripe", (*world).stripe},
	{"Striped ops", (*world).stripeOps},
	{"ipc.Export", (*world).ipcExport},
	{"ipc transfer", (*world).ipcTransfer},
	{"ipc transfer", (*world).ipcTransfer},
	{"ipc.ExportFabric", (*world).ipcExportFabric},
	{"ipc tickets", (*world).ipcTicket},
	{"FabricHandle.Import", (*world).ipcFabricImport},
	{"ipc.ImportFabric", (*world).ipcImportFabric},
	{"Imported ops", (*world).importedOps},
	{"Exported.Close", (*world).exportedClose},
	// Raw backend calls.
	{"raw queries", (*world).rawQuery},
	{"raw Create", (*world).rawCreate},
	{"raw Create", (*world).rawCreate},
	{"raw Release", (*world).rawRelease},
	{"raw Retain", (*world).rawRetain},
	{"raw Properties", (*world).rawProperties},
	{"raw Reserve", (*world).rawReserve},
	{"raw Reserve", (*world).rawReserve},
	{"raw Free", (*world).rawFree},
	{"raw Map", (*world).rawMap},
	{"raw Map", (*world).rawMap},
	{"raw Unmap", (*world).rawUnmap},
	{"raw SetAccess", (*world).rawSetAccess},
	{"raw GetAccess/AddressRange", (*world).rawAccessQuery},
	{"raw ExportFD/ImportFD", (*world).rawFD},
	{"raw ExportFabric/ImportFabric", (*world).rawFabric},
	{"raw Win32", (*world).rawWin32},
	{"raw MulticastCreate", (*world).rawMulticastCreate},
	{"raw multicast", (*world).rawMulticast},
	{"raw copies", (*world).rawCopy},
	{"raw PointerAttributes", (*world).rawPointer},
	// Faults, nil inputs, descriptors.
	{"FailNth", (*world).armFault},
	{"FailNth", (*world).armFault},
	{"ClearFaults", (*world).clearFaults},
	{"nil and zero inputs", (*world).nilInput},
	{"close descriptor", (*world).closeDescriptor},
}

// sized is a raw handle with the size it was made with (0: unknown).
type sized struct {
	h    cu.MemHandle
	size uint64
}

// mgr is the Manager of the Sim under test, sometimes the foreign one's.
func (w *world) mgr(a *args) *vmm.Manager {
	if a.n(8) == 0 {
		return w.fm
	}
	return w.m
}

// alloc is an allocation of the pools (perhaps closed, perhaps of the foreign Sim).
func (w *world) alloc(a *args) (*vmm.Allocation, bool) { return pick(w, a, &w.allocs) }

// anyAddr is an address somewhere: in or at the edge of an object of the pools, of the
// foreign Sim, or nowhere.
func (w *world) anyAddr(a *args) cu.DevicePtr {
	var base cu.DevicePtr
	var size uint64
	switch a.n(11) {
	case 0:
		if x, ok := pick(w, a, &w.maps); ok {
			base, size = x.Addr(), x.Size()
		}
	case 1:
		if x, ok := pick(w, a, &w.resvs); ok {
			base, size = x.Base(), x.Size()
		}
	case 2:
		if x, ok := pick(w, a, &w.bufs); ok {
			base, size = x.Base(), x.Size()
		}
	case 3:
		if x, ok := pick(w, a, &w.arrays); ok {
			base, size = x.Base(), x.Size()
		}
	case 4:
		if x, ok := pick(w, a, &w.mems); ok {
			base, size = x.Base(), x.Size()
		}
	case 5:
		if x, ok := pick(w, a, &w.ranges); ok {
			base, size = x.ptr, x.size
		}
	case 6, 7:
		if x, ok := pick(w, a, &w.rmaps); ok {
			base, size = x.ptr, x.size
		}
	case 8:
		if x, ok := pick(w, a, &w.imported); ok {
			base, size = x.Base(), x.Size()
		}
	case 9:
		if x, ok := pick(w, a, &w.stripes); ok {
			base, size = x.Base(), x.Size()
		}
	default:
		return of[cu.DevicePtr](a, 0, 0x302000000, 1<<47, ^cu.DevicePtr(0), ^cu.DevicePtr(0)&^(1<<21-1))
	}
	return base + cu.DevicePtr(of(a, 0, 0, 0, w.gran, size/2, size-1, size, 1))
}

// anyHandle is a handle value for a call that takes no reference away: one of the raw
// pools, of a typed allocation or a buffer's chunk (of either Sim), or garbage.
func (w *world) anyHandle(a *args) cu.MemHandle {
	switch a.n(8) {
	case 0, 1, 2:
		if x, ok := pick(w, a, &w.handles); ok {
			return x.h
		}
	case 3:
		if x, ok := pick(w, a, &w.mcs); ok {
			return x.h
		}
	case 4, 5:
		if x, ok := w.alloc(a); ok {
			return x.Handle()
		}
	case 6:
		if x, ok := pick(w, a, &w.bufs); ok {
			if cs := x.Chunks(); len(cs) > 0 {
				return cs[a.n(len(cs))].Handle
			}
		}
	}
	return w.badHandle(a)
}

// badHandle is a value that is no handle of the Sim under test: garbage, or a value of the
// foreign Sim.
func (w *world) badHandle(a *args) cu.MemHandle {
	if a.bit() {
		if x, ok := w.alloc(a); ok {
			if h := x.Handle(); h > foreignFloor {
				return h
			}
		}
	}
	return of[cu.MemHandle](a, 0, ^cu.MemHandle(0), 1, 0x5000000001, 0x500000001f, 1<<63)
}

func (w *world) results(a *args) cu.Result {
	return of(a, cu.ERROR_OUT_OF_MEMORY, cu.ERROR_INVALID_VALUE, cu.ERROR_UNKNOWN,
		cu.ERROR_NOT_SUPPORTED, cu.ERROR_ILLEGAL_STATE, cu.ERROR_OPERATING_SYSTEM, cu.Result(12345))
}

// --- the typed layer ---

func (w *world) create(a *args) {
	m := w.mgr(a)
	x, err := m.Create(a.size(w.gran), a.props(w.devs))
	w.check("Manager.Create", err, "create")
	if err == nil {
		put(w, &w.allocs, x)
	}
}

func (w *world) retain(a *args) {
	x, err := w.mgr(a).Retain(w.anyAddr(a))
	w.check("Manager.Retain", err, "retain")
	if err == nil {
		put(w, &w.allocs, x)
	}
}

func (w *world) fd(a *args) int {
	if a.n(4) != 0 {
		if fd, ok := pick(w, a, &w.fds); ok {
			return fd
		}
	}
	return of(a, -1, 0, 1<<30, otherFD())
}

func (w *world) importFD(a *args) {
	x, err := w.mgr(a).ImportFD(w.fd(a), a.size(w.gran))
	w.check("Manager.ImportFD", err, "import")
	if err == nil {
		put(w, &w.allocs, x)
	}
}

func (w *world) fabricHandle(a *args) ipc.FabricHandle {
	fh, ok := pick(w, a, &w.fabric)
	switch a.n(6) {
	case 0:
		fh.Handle[16+a.n(48)] ^= 1 << a.n(8) // a forged secret, pid, descriptor or device
	case 1:
		fh.Size = a.size(w.gran)
	case 2:
		if !ok {
			for i := range fh.Handle {
				fh.Handle[i] = a.byte()
			}
		}
	}
	return fh
}

func (w *world) importFabric(a *args) {
	fh := w.fabricHandle(a)
	x, err := w.mgr(a).ImportFabric(fh.Handle, fh.Size)
	w.check("Manager.ImportFabric", err, "import")
	if err == nil {
		put(w, &w.allocs, x)
	}
}

func (w *world) granularity(a *args) {
	_, err := w.mgr(a).Granularity(a.props(w.devs), a.bit())
	w.check("Manager.Granularity", err, "granularity")
}

func (w *world) managerCopy(a *args) {
	m, dev, addr, b := w.mgr(a), a.dev(w.devs), w.anyAddr(a), a.buf()
	switch a.n(4) {
	case 0:
		w.check("Manager.WriteAt", m.WriteAt(dev, b, addr), "write")
	case 1:
		w.check("Manager.ReadAt", m.ReadAt(dev, b, addr), "read")
	case 2:
		w.check("Manager.Copy", m.Copy(dev, addr, w.anyAddr(a), a.count()), "copy")
	default:
		w.check("Manager.Fill", m.Fill(dev, addr, a.byte(), a.count()), "fill")
	}
}

func (w *world) managerQuery(a *args) {
	m, dev := w.mgr(a), a.dev(w.devs)
	var err error
	switch a.n(8) {
	case 0:
		_, err = m.DriverVersion()
		w.check("Manager.DriverVersion", err, "driver version")
	case 1:
		_, err = m.DeviceCount()
		w.check("Manager.DeviceCount", err, "device count")
	case 2:
		_, err = m.Device(dev)
		w.check("Manager.Device", err, "device")
	case 3:
		_, err = m.Attribute(dev, cu.DeviceAttribute(int(a.byte())-8))
		w.check("Manager.Attribute", err, "attribute")
	case 4:
		_, err = m.CanAccessPeer(dev, a.dev(w.devs))
		w.check("Manager.CanAccessPeer", err, "can access peer")
	case 5:
		w.check("Manager.CheckProps", m.CheckProps(a.props(w.devs), dev), "check", "props", "attribute", "unsupported")
	case 6:
		_, err = m.MulticastGranularity(w.multicastProps(a), a.bit())
		w.check("Manager.MulticastGranularity", err, "multicast granularity")
	default:
		_, _ = m.Name(), m.Backend()
	}
}

func (w *world) allocQuery(a *args) {
	x, ok := w.alloc(a)
	if !ok {
		return
	}
	_, _ = x.Handle(), x.Size()
	_, err := x.Properties()
	w.check("Allocation.Properties", err, "properties")
	_, err = x.Compressible()
	w.check("Allocation.Compressible", err, "properties", "compressible")
}

func (w *world) allocExportFD(a *args) {
	x, ok := w.alloc(a)
	if !ok {
		return
	}
	fd, err := x.ExportFD()
	w.check("Allocation.ExportFD", err, "export")
	if err == nil {
		put(w, &w.fds, fd)
	}
}

func (w *world) allocExportFabric(a *args) {
	x, ok := w.alloc(a)
	if !ok {
		return
	}
	fh, err := x.ExportFabric()
	w.check("Allocation.ExportFabric", err, "export")
	if err == nil {
		put(w, &w.fabric, ipc.FabricHandle{Handle: fh, Size: x.Size()})
	}
}

func (w *world) allocClose(a *args) {
	if x, ok := w.alloc(a); ok {
		w.check("Allocation.Close", x.Close(), "release", "close")
	}
}

func (w *world) reserve(a *args) {
	var opts []vmm.ReserveOption
	switch a.n(4) {
	case 1:
		opts = append(opts, vmm.WithAlignment(of[uint64](a, 0, w.gran, 64*mib, 3, 1<<40, 1<<63)))
	case 2:
		opts = append(opts, vmm.At(w.anyAddr(a)))
	case 3:
		opts = append(opts, vmm.WithAlignment(4*w.gran), vmm.At(w.anyAddr(a)))
	}
	x, err := w.mgr(a).Reserve(a.size(w.gran), opts...)
	w.check("Manager.Reserve", err, "reserve")
	if err == nil {
		put(w, &w.resvs, x)
	}
}

func (w *world) mapTyped(a *args) {
	r, ok := pick(w, a, &w.resvs)
	if !ok {
		return
	}
	x, ok := w.alloc(a)
	if !ok {
		return
	}
	mp, err := r.Map(a.offset(r.Size(), w.gran), x)
	w.check("Reservation.Map", err, "map")
	if err == nil {
		put(w, &w.maps, mp)
	}
}

func (w *world) resvClose(a *args) {
	if x, ok := pick(w, a, &w.resvs); ok {
		_, _ = x.Base(), x.Size()
		w.check("Reservation.Close", x.Close(), "unmap", "free", "close")
	}
}

func (w *world) setAccess(a *args) {
	if x, ok := pick(w, a, &w.maps); ok {
		w.check("Mapping.SetAccess", x.SetAccess(a.access(w.devs)...), "set access")
	}
}

func (w *world) getAccess(a *args) {
	if x, ok := pick(w, a, &w.maps); ok {
		_, _ = x.Addr(), x.Size()
		_, err := x.Access(a.dev(w.devs))
		w.check("Mapping.Access", err, "get access", "access")
	}
}

func (w *world) resvOps(a *args) {
	r, ok := pick(w, a, &w.resvs)
	if !ok {
		return
	}
	off := a.offset(r.Size(), w.gran)
	switch a.n(6) {
	case 0:
		_, err := r.From(a.dev(w.devs)).WriteAt(a.buf(), int64(off))
		w.check("View.WriteAt", err, "write")
	case 1:
		_, err := r.From(a.dev(w.devs)).ReadAt(a.buf(), int64(off))
		w.check("View.ReadAt", err, "read")
	case 2:
		w.check("Reservation.SetAccess", r.SetAccess(off, a.size(w.gran), a.access(w.devs)...), "set access")
	case 3, 4:
		// Closes the Mapping values of what it unmaps (they stay in the pool, closed).
		w.check("Reservation.Unmap", r.Unmap(off, a.size(w.gran)), "unmap")
	default:
		_, _, _ = r.Contains(w.anyAddr(a), a.count()), r.Base(), r.Size()
	}
}

// multicastProps are a multicast object's properties: mostly a team of two devices.
func (w *world) multicastProps(a *args) vmm.MulticastProps {
	return vmm.MulticastProps{
		Devices:     of(a, 2, 2, 2, 2, 2, w.devs, 1, 0, w.devs+1, -1),
		Size:        a.size(w.gran),
		HandleTypes: of(a, cu.MEM_HANDLE_TYPE_NONE, cu.MEM_HANDLE_TYPE_NONE, cu.MEM_HANDLE_TYPE_FABRIC, 0x40),
	}
}

func (w *world) multicastCreate(a *args) {
	mc, err := w.mgr(a).CreateMulticast(w.multicastProps(a))
	w.check("Manager.CreateMulticast", err, "create multicast")
	if err == nil {
		put(w, &w.multicasts, mc)
	}
}

func (w *world) multicastOps(a *args) {
	mc, ok := pick(w, a, &w.multicasts)
	if !ok {
		return
	}
	off := a.offset(mc.Size(), w.gran)
	switch a.n(7) {
	case 0, 1:
		w.check("Multicast.AddDevice", mc.AddDevice(a.dev(w.devs)), "multicast add device")
	case 2:
		x, ok := w.alloc(a)
		if !ok {
			return
		}
		memOff := uint64(0)
		if a.n(8) == 0 {
			memOff = a.offset(x.Size(), w.gran)
		}
		size := x.Size()
		if a.n(4) == 0 {
			size = a.size(w.gran)
		}
		w.check("Multicast.Bind", mc.Bind(off, x, memOff, size), "multicast bind")
	case 3:
		if a.bit() {
			w.check("Multicast.BindAddress", mc.BindAddress(off, w.anyAddr(a), a.dev(w.devs), a.size(w.gran)), "multicast bind")
			return
		}
		x, ok := w.alloc(a)
		if !ok {
			return
		}
		w.check("Multicast.BindFor", mc.BindFor(a.dev(w.devs), off, x, 0, x.Size()), "multicast bind")
	case 4:
		w.check("Multicast.Unbind", mc.Unbind(a.dev(w.devs), off, a.size(w.gran)), "multicast unbind")
	case 5:
		r, ok := pick(w, a, &w.resvs)
		if !ok {
			return
		}
		mp, err := r.MapMulticast(a.offset(r.Size(), w.gran), mc)
		w.check("Reservation.MapMulticast", err, "map")
		if err == nil {
			put(w, &w.maps, mp)
		}
	default:
		_, _ = mc.Handle(), mc.Size()
		w.check("Multicast.Close", mc.Close(), "release multicast", "multicast unbind", "close")
	}
}

// tx runs a transaction of a few steps on pooled and new objects, then commits or rolls
// it back; what it makes joins the pools either way (rolled back, it is closed, or, where
// the close failed, waits in the world's Pending or the Manager's, and is closed again by
// the teardown).
func (w *world) tx(a *args) {
	m := w.mgr(a)
	pending := &w.pending
	if a.n(4) == 0 {
		pending = nil
	}
	t := m.Begin(pending)
	var err error
	for range 1 + a.n(3) {
		switch a.n(3) {
		case 0:
			var x *vmm.Allocation
			if x, err = t.Create(a.size(w.gran), a.props(w.devs)); err == nil {
				put(w, &w.allocs, x)
			}
			w.check("Tx.Create", err, "create")
		case 1:
			var r *vmm.Reservation
			if r, err = t.Reserve(a.size(w.gran)); err == nil {
				put(w, &w.resvs, r)
			}
			w.check("Tx.Reserve", err, "reserve")
		default:
			r, ok := pick(w, a, &w.resvs)
			x, ok2 := w.alloc(a)
			if !ok || !ok2 {
				continue
			}
			var mp *vmm.Mapping
			if mp, err = t.Map(r, a.offset(r.Size(), w.gran), x); err == nil {
				put(w, &w.maps, mp)
			}
			w.check("Tx.Map", err, "map")
		}
		if err != nil {
			break
		}
	}
	if err == nil && a.bit() {
		t.Commit()
	} else {
		cause := err
		if cause == nil {
			cause = errFuzzRollback
		}
		rerr := t.Rollback(cause)
		if !errors.Is(rerr, cause) {
			w.errorf("Tx.Rollback(%v) returned %v, which is not its cause", cause, rerr)
		}

	}
	if a.n(4) == 0 {
		w.check("Pending.Retry", w.pending.Retry(), "release", "free", "unmap", "close")
		_ = w.pending.Len()
		w.check("Manager.Pending.Retry", m.Pending().Retry(), "release", "free", "unmap", "close")
	}
}

func (w *world) pointer(a *args) {
	m, addr := w.mgr(a), w.anyAddr(a)
	var p vmm.Pointer
	var err error
	if a.bit() {
		p, err = m.Pointer(addr)
	} else {
		p, err = m.PointerOn(a.dev(w.devs), addr)
	}
	w.check("Manager.Pointer", err, "pointer")
	_, _ = p.Share()
	_, _ = p.String(), p.AllowedHandleTypes()
}

// errFuzzRollback is the cause of the rollbacks tx asks for.
var errFuzzRollback = errors.New("vmm: the harness rolls back")

func (w *world) mappingClose(a *args) {
	if x, ok := pick(w, a, &w.maps); ok {
		w.check("Mapping.Close", x.Close(), "unmap", "close")
	}
}

// --- the building blocks ---

func (w *world) optProps(a *args) *vmm.Props {
	if a.n(4) != 0 {
		return nil
	}
	p := a.props(w.devs)
	return &p
}

// optAccess is an access list for a block's options: mostly none (the block's default),
// sometimes one of access's.
func (w *world) optAccess(a *args) []cu.MemAccessDesc {
	if a.n(3) == 0 {
		return a.access(w.devs)
	}
	return nil
}

func (w *world) bufNew(a *args) {
	opts := buffer.Options{
		Device:    a.dev(w.devs),
		Props:     w.optProps(a),
		Access:    w.optAccess(a),
		Policy:    of(a, buffer.Geometric, buffer.Exact, buffer.Geometric, buffer.Exact, buffer.Geometric, buffer.Exact, buffer.Geometric, buffer.Policy(7)),
		MinChunk:  of[uint64](a, 0, 0, w.gran, 3*w.gran, 1, 1<<63),
		MaxChunk:  of[uint64](a, 0, 0, w.gran, 4*w.gran, 1),
		Reserve:   of[uint64](a, 0, 4*w.gran, w.gran, 64*w.gran, 1<<40, ^uint64(0)),
		FixedBase: a.bit(),
	}
	x, err := buffer.New(w.mgr(a), a.smallSize(w.gran), opts)
	w.check("buffer.New", err, "new")
	if err == nil {
		put(w, &w.bufs, x)
	}
}

func (w *world) bufResize(a *args) {
	x, ok := pick(w, a, &w.bufs)
	if !ok {
		return
	}
	if a.bit() {
		w.check("Buffer.Grow", x.Grow(a.smallSize(w.gran)), "grow")
	} else {
		w.check("Buffer.Shrink", x.Shrink(a.smallSize(w.gran)), "shrink")
	}
	if a.n(6) == 0 {
		c := x.Config()
		if a.bit() {
			c.Props = a.props(w.devs)
		}
		if a.bit() {
			c.Access = a.access(w.devs)
		}
		w.check("Buffer.SetConfig", x.SetConfig(c), "config")
	}
	_, _, _, _, _ = x.Stats(), x.Chunks(), x.Base(), x.Size(), x.Granularity()
}

// at is an offset for ReadAt and WriteAt into something of size n.
func (a *args) at(n uint64) int64 {
	return of(a, 0, 0, int64(n)/2, int64(n)-1, int64(n), -1, 1<<62, int64(n)-4096)
}

func (w *world) bufCopy(a *args) {
	x, ok := pick(w, a, &w.bufs)
	if !ok {
		return
	}
	b, off := a.buf(), a.at(x.Size())
	if a.bit() {
		_, err := x.WriteAt(b, off)
		w.check("Buffer.WriteAt", err, "write")
	} else {
		_, err := x.ReadAt(b, off)
		w.check("Buffer.ReadAt", err, "read")
	}
}

func (w *world) bufClose(a *args) {
	if x, ok := pick(w, a, &w.bufs); ok {
		w.check("Buffer.Close", x.Close(), "close")
	}
}

func (w *world) sparseNew(a *args) {
	opts := sparse.Options{
		Device:   a.dev(w.devs),
		Props:    w.optProps(a),
		Access:   w.optAccess(a),
		PageSize: of[uint64](a, 0, 0, w.gran, 3*w.gran, 1, 1<<63),
		Zero:     a.bit(),
	}
	size := a.smallSize(w.gran)
	if a.n(8) == 0 {
		size = of[uint64](a, 1<<40, 64<<40)
	}
	x, err := sparse.New(w.mgr(a), size, opts)
	w.check("sparse.New", err, "new")
	if err == nil {
		put(w, &w.arrays, x)
	}
}

// pages is a range length for Commit and Decommit: at most 16 pages, or one that must
// fail.
func (a *args) pages(g uint64) uint64 {
	return of(a, g, 2*g, 16*g, 1, 0, g+1, 1<<63, ^uint64(0))
}

func (w *world) sparseCommit(a *args) {
	x, ok := pick(w, a, &w.arrays)
	if !ok {
		return
	}
	ps := x.PageSize()
	off, n := a.offset(x.Size(), ps), a.pages(ps)
	if a.n(3) != 0 {
		w.check("Array.Commit", x.Commit(off, n), "commit")
	} else {
		w.check("Array.Decommit", x.Decommit(off, n), "decommit")
	}
	_, _, _ = x.Stats(), x.CommittedRanges(), x.Committed(off)
}

func (w *world) sparseCopy(a *args) {
	x, ok := pick(w, a, &w.arrays)
	if !ok {
		return
	}
	b, off := a.buf(), a.at(x.Size())
	if a.bit() {
		_, err := x.WriteAt(b, off)
		w.check("Array.WriteAt", err, "write")
	} else {
		_, err := x.ReadAt(b, off)
		w.check("Array.ReadAt", err, "read")
	}
}

func (w *world) sparseClose(a *args) {
	if x, ok := pick(w, a, &w.arrays); ok {
		w.check("Array.Close", x.Close(), "close")
	}
}

func (w *world) peerNew(a *args) {
	x, err := peer.New(w.mgr(a), a.dev(w.devs), a.smallSize(w.gran))
	w.check("peer.New", err, "new")
	if err == nil {
		put(w, &w.mems, x)
	}
}

func (w *world) peerGrant(a *args) {
	x, ok := pick(w, a, &w.mems)
	if !ok {
		return
	}
	devs := a.devList(w.devs)
	if a.bit() {
		w.check("Memory.Grant", x.Grant(of(a, peer.ReadWrite, peer.ReadOnly, peer.Mode(9)), devs...), "grant")
	} else {
		w.check("Memory.Revoke", x.Revoke(devs...), "revoke")
	}
	_, _, _, _ = x.Grants(), x.Handle(), x.Owner(), x.Base()
}

func (w *world) peerCopy(a *args) {
	x, ok := pick(w, a, &w.mems)
	if !ok {
		return
	}
	dev, b, off := a.dev(w.devs), a.buf(), a.at(x.Size())
	switch a.n(5) {
	case 0:
		_, err := x.WriteAt(b, off)
		w.check("Memory.WriteAt", err, "write")
	case 1:
		_, err := x.ReadAt(b, off)
		w.check("Memory.ReadAt", err, "read")
	case 2:
		_, err := x.From(dev).WriteAt(b, off)
		w.check("Memory.From.WriteAt", err, "write")
	case 3:
		_, err := x.From(dev).ReadAt(b, off)
		w.check("Memory.From.ReadAt", err, "read")
	default:
		_, err := x.Access(dev)
		w.check("Memory.Access", err, "access")
	}
}

func (w *world) peerClose(a *args) {
	if x, ok := pick(w, a, &w.mems); ok {
		w.check("Memory.Close", x.Close(), "close")
	}
}

func (w *world) stripe(a *args) {
	opts := peer.StripeOptions{Stripe: of[uint64](a, 0, w.gran, 2*w.gran, 1, 1<<63), Access: a.devList(w.devs)}
	x, err := peer.Stripe(w.mgr(a), a.smallSize(w.gran), a.devList(w.devs), opts)
	w.check("peer.Stripe", err, "stripe")
	if err == nil {
		put(w, &w.stripes, x)
	}
}

func (w *world) stripeOps(a *args) {
	x, ok := pick(w, a, &w.stripes)
	if !ok {
		return
	}
	dev, b, off := a.dev(w.devs), a.buf(), a.at(x.Size())
	switch a.n(6) {
	case 0:
		_, err := x.WriteAt(b, off)
		w.check("Striped.WriteAt", err, "write")
	case 1:
		_, err := x.ReadAt(b, off)
		w.check("Striped.ReadAt", err, "read")
	case 2:
		_, err := x.From(dev).WriteAt(b, off)
		w.check("Striped.From.WriteAt", err, "write")
	case 3:
		_, err := x.From(dev).ReadAt(b, off)
		w.check("Striped.From.ReadAt", err, "read")
	case 4:
		_, err := x.DeviceAt(uint64(off))
		w.check("Striped.DeviceAt", err, "device at", "stripe")
		_ = x.Stripes()
	default:
		w.check("Striped.Close", x.Close(), "close")
	}
}

func (w *world) ipcExport(a *args) {
	m := w.mgr(a)
	var e *ipc.Exported
	var err error
	if a.bit() {
		var as []*vmm.Allocation
		for range a.n(4) {
			if x, ok := w.alloc(a); ok {
				as = append(as, x)
			}
		}
		e, err = ipc.Export(m, as...)
		w.check("ipc.Export", err, "export")
	} else {
		// A buffer's chunks, as a program exports a growable buffer.
		var as []*vmm.Allocation
		if x, ok := pick(w, a, &w.bufs); ok {
			for _, c := range x.Chunks() {
				as = append(as, c.Allocation)
			}
		}
		e, err = ipc.Export(m, as...)
		w.check("ipc.Export", err, "export")
	}
	if err == nil {
		put(w, &w.exported, e)
	}
}

func (w *world) ipcExportFabric(a *args) {
	x, ok := w.alloc(a)
	if !ok {
		return
	}
	fh, err := ipc.ExportFabric(x)
	w.check("ipc.ExportFabric", err, "export")
	if err == nil {
		put(w, &w.fabric, fh)
	}
}

func (w *world) ipcFabricImport(a *args) {
	fh := w.fabricHandle(a)
	// The handle travels in text or binary form, as between processes.
	if a.bit() {
		b, _ := fh.MarshalBinary()
		if a.bit() {
			b[a.n(len(b))] ^= 1 << a.n(8)
		}
		var got ipc.FabricHandle
		if err := got.UnmarshalBinary(b); err != nil {
			w.check("FabricHandle.UnmarshalBinary", err, "fabric handle")
			return
		}
		fh = got
	} else {
		b, _ := fh.MarshalText()
		if a.bit() {
			b[a.n(len(b))] ^= 1 << a.n(7)
		}
		var got ipc.FabricHandle
		if err := got.UnmarshalText(b); err != nil {
			w.check("FabricHandle.UnmarshalText", err, "fabric handle")
			return
		}
		fh = got
	}
	x, err := fh.Import(w.mgr(a))
	w.check("FabricHandle.Import", err, "import")
	if err == nil {
		put(w, &w.allocs, x)
	}
}

func (w *world) ipcImportFabric(a *args) {
	hs := make([]ipc.FabricHandle, a.n(4))
	for i := range hs {
		hs[i] = w.fabricHandle(a)
	}
	x, err := ipc.ImportFabric(w.mgr(a), hs, a.devList(w.devs))
	w.check("ipc.ImportFabric", err, "import")
	if err == nil {
		put(w, &w.imported, x)
	}
}

func (w *world) importedOps(a *args) {
	x, ok := pick(w, a, &w.imported)
	if !ok {
		return
	}
	b, off := a.buf(), a.at(x.Size())
	switch a.n(3) {
	case 0:
		_, err := x.WriteAt(b, off)
		w.check("Imported.WriteAt", err, "write")
	case 1:
		_, err := x.ReadAt(b, off)
		w.check("Imported.ReadAt", err, "read")
	default:
		w.check("Imported.Close", x.Close(), "close", "unmap", "release", "free")
	}
}

func (w *world) exportedClose(a *args) {
	if x, ok := pick(w, a, &w.exported); ok {
		_ = x.FDs()
		w.check("Exported.Close", x.Close(), "close")
	}
}

// --- raw backend calls, on the Sim under test ---

func (w *world) rawQuery(a *args) {
	s := w.s
	var err error
	var call string
	switch a.n(8) {
	case 0:
		_, err = s.DriverVersion()
		call = "cuDriverGetVersion"
	case 1:
		_, err = s.DeviceCount()
		call = "cuDeviceGetCount"
	case 2:
		_, err = s.Device(a.dev(w.devs))
		call = "cuDeviceGet"
	case 3:
		_, err = s.Attribute(a.dev(w.devs), cu.DeviceAttribute(int(a.byte())-8))
		call = "cuDeviceGetAttribute"
	case 4:
		_, err = s.CanAccessPeer(a.dev(w.devs), a.dev(w.devs))
		call = "cuDeviceCanAccessPeer"
	case 5:
		_, err = s.P2PAttribute(cu.P2PAttribute(a.n(8)), a.dev(w.devs), a.dev(w.devs))
		call = "cuDeviceGetP2PAttribute"
	default:
		var prop *cu.MemAllocationProp
		if a.n(4) != 0 {
			p := a.props(w.devs).Driver()
			prop = &p
		}
		_, err = s.Granularity(prop, cu.MemAllocationGranularityFlags(a.n(3)))
		call = "cuMemGetAllocationGranularity"
	}
	w.check("raw "+call, err, call)
}

func (w *world) rawProp(a *args) *cu.MemAllocationProp {
	if a.n(16) == 0 {
		return nil
	}
	p := a.props(w.devs).Driver()
	switch a.n(16) {
	case 0:
		p.Type = of(a, cu.MEM_ALLOCATION_TYPE_INVALID, cu.MEM_ALLOCATION_TYPE_MANAGED, 7)
	case 1:
		p.Reserved[a.n(4)] = 1
	case 2:
		p.CompressionType = 9
	}
	return &p
}

func (w *world) rawCreate(a *args) {
	size, prop := a.size(w.gran), w.rawProp(a)
	flags := uint64(0)
	if a.n(16) == 0 {
		flags = 1
	}
	h, err := w.s.Create(size, prop, flags)
	w.check("raw Create", err, "cuMemCreate")
	if err == nil {
		put(w, &w.handles, sized{h, size})
	}
}

func (w *world) rawRelease(a *args) {
	pool := &w.handles
	if a.n(4) == 0 {
		pool = &w.mcs
	}
	if a.n(4) == 0 {
		// A value the Sim never handed out: must fail.
		v := w.badHandle(a)
		err := w.s.Release(v)
		if err == nil {
			w.errorf("Release(%v) of a value the Sim never handed out succeeded", v)
		}
		w.check("raw Release", err, "cuMemRelease")
		return
	}
	x, ok := take(w, a, pool)
	if !ok {
		return
	}
	err := w.s.Release(x.h)
	w.check("raw Release", err, "cuMemRelease")
	if err != nil {
		put(w, pool, x)
	}
}

func (w *world) rawRetain(a *args) {
	h, err := w.s.Retain(w.anyAddr(a))
	w.check("raw Retain", err, "cuMemRetainAllocationHandle")
	if err == nil {
		put(w, &w.handles, sized{h: h})
	}
}

func (w *world) rawProperties(a *args) {
	_, err := w.s.Properties(w.anyHandle(a))
	w.check("raw Properties", err, "cuMemGetAllocationPropertiesFromHandle")
}

func (w *world) rawReserve(a *args) {
	size := a.size(w.gran)
	align := of[uint64](a, 0, 0, w.gran, 4*w.gran, 3, 1<<40, 1<<63)
	var hint cu.DevicePtr
	if a.n(3) == 0 {
		hint = w.anyAddr(a)
	}
	flags := uint64(0)
	if a.n(16) == 0 {
		flags = 1
	}
	ptr, err := w.s.Reserve(size, align, hint, flags)
	w.check("raw Reserve", err, "cuMemAddressReserve")
	if err == nil {
		put(w, &w.ranges, span{ptr, size})
	}
}

func (w *world) rawFree(a *args) {
	x, ok := take(w, a, &w.ranges)
	if !ok {
		return
	}
	// The exact range, or one starting inside it that is not a reservation: only the
	// exact one may succeed, and no other reservation can start inside ours.
	ptr, size := x.ptr, x.size
	switch a.n(5) {
	case 1:
		size += w.gran
	case 2:
		size = of(a, 0, size-w.gran, size/2, ^uint64(0))
	case 3:
		off := of(a, w.gran, size/2, 1)
		if off < size {
			ptr, size = ptr+cu.DevicePtr(off), size-off
		}
	}
	w.rawMu.Lock()
	defer w.rawMu.Unlock()
	err := w.s.Free(ptr, size)
	w.check("raw Free", err, "cuMemAddressFree")
	switch {
	case err == nil && (ptr != x.ptr || size != x.size):
		w.errorf("Free(%v, %d) of part of the reservation %v+%d succeeded", ptr, size, x.ptr, x.size)
	case err == nil:
		w.dropSpans(x.ptr, x.end(), false)
	default:
		put(w, &w.ranges, x)
	}
}

// rawTarget is an address to map at: in a raw reservation, perhaps misaligned or at its
// end, sometimes anywhere.
func (w *world) rawTarget(a *args) cu.DevicePtr {
	if a.n(8) == 0 {
		return w.anyAddr(a)
	}
	x, ok := pick(w, a, &w.ranges)
	if !ok {
		return w.anyAddr(a)
	}
	return x.ptr + cu.DevicePtr(a.offset(x.size, w.gran))
}

func (w *world) rawMap(a *args) {
	var h sized
	var ok bool
	switch a.n(6) {
	case 0:
		h, ok = pick(w, a, &w.mcs)
	case 1:
		h.h, ok = w.anyHandle(a), true
	default:
		h, ok = pick(w, a, &w.handles)
	}
	if !ok {
		return
	}
	size := h.size
	if size == 0 || a.n(6) == 0 {
		size = a.size(w.gran)
	}
	off := uint64(0)
	if a.n(8) == 0 {
		off = of[uint64](a, w.gran, 1, ^uint64(0))
	}
	flags := uint64(0)
	if a.n(16) == 0 {
		flags = 1
	}
	ptr := w.rawTarget(a)
	w.rawMu.RLock()
	defer w.rawMu.RUnlock()
	err := w.s.Map(ptr, size, off, h.h, flags)
	w.check("raw Map", err, "cuMemMap")
	if err == nil {
		put(w, &w.rmaps, span{ptr, size})
	}
}

func (w *world) rawUnmap(a *args) {
	var sp span
	if a.n(3) != 0 {
		x, ok := take(w, a, &w.rmaps)
		if !ok {
			return
		}
		err := w.s.Unmap(x.ptr, x.size)
		w.check("raw Unmap", err, "cuMemUnmap")
		if err != nil {
			put(w, &w.rmaps, x)
		}
		return
	}
	// A range that may hold several mappings, split one or hold none, of anybody's.
	sp.ptr = w.rawTarget(a)
	sp.size = a.size(w.gran)
	w.rawMu.Lock()
	defer w.rawMu.Unlock()
	err := w.s.Unmap(sp.ptr, sp.size)
	w.check("raw Unmap", err, "cuMemUnmap")
	if err == nil {
		end := sp.end()
		if end < sp.ptr {
			end = ^cu.DevicePtr(0)
		}
		w.dropSpans(sp.ptr, end, true)
	}
}

func (w *world) rawSetAccess(a *args) {
	var sp span
	if x, ok := pick(w, a, &w.rmaps); ok && a.n(3) != 0 {
		sp = x
	} else {
		sp = span{w.anyAddr(a), a.size(w.gran)}
	}
	err := w.s.SetAccess(sp.ptr, sp.size, a.access(w.devs))
	w.check("raw SetAccess", err, "cuMemSetAccess")
}

func (w *world) rawAccessQuery(a *args) {
	addr := w.anyAddr(a)
	if a.bit() {
		loc := of(a, vmm.OnDevice(a.dev(w.devs)), vmm.OnHost(), vmm.OnHostNUMA(0), vmm.Location{Type: 9})
		_, err := w.s.GetAccess(loc, addr)
		w.check("raw GetAccess", err, "cuMemGetAccess")
	} else {
		_, _, err := w.s.AddressRange(addr)
		w.check("raw AddressRange", err, "cuMemGetAddressRange")
	}
}

func (w *world) rawFD(a *args) {
	if a.bit() {
		fd, err := w.s.ExportFD(w.anyHandle(a))
		w.check("raw ExportFD", err, "cuMemExportToShareableHandle")
		if err == nil {
			put(w, &w.fds, fd)
		}
		return
	}
	h, err := w.s.ImportFD(w.fd(a))
	w.check("raw ImportFD", err, "cuMemImportFromShareableHandle")
	if err == nil {
		put(w, &w.handles, sized{h: h})
	}
}

func (w *world) rawFabric(a *args) {
	if a.bit() {
		fh, err := w.s.ExportFabric(w.anyHandle(a))
		w.check("raw ExportFabric", err, "cuMemExportToShareableHandle")
		if err == nil {
			put(w, &w.fabric, ipc.FabricHandle{Handle: fh, Size: w.gran})
		}
		return
	}
	h, err := w.s.ImportFabric(w.fabricHandle(a).Handle)
	w.check("raw ImportFabric", err, "cuMemImportFromShareableHandle")
	if err == nil {
		put(w, &w.handles, sized{h: h})
	}
}

func (w *world) rawWin32(a *args) {
	t := of(a, cu.MEM_HANDLE_TYPE_WIN32, cu.MEM_HANDLE_TYPE_WIN32_KMT, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	v, err := w.s.ExportWin32(w.anyHandle(a), t)
	w.check("raw ExportWin32", err, "cuMemExportToShareableHandle")
	if err != nil || a.bit() {
		v = of[uintptr](a, 0, 0x1000, 0x1004, ^uintptr(0))
	}
	h, err := w.s.ImportWin32(v, of(a, t, cu.MEM_HANDLE_TYPE_FABRIC))
	w.check("raw ImportWin32", err, "cuMemImportFromShareableHandle")
	if err == nil {
		put(w, &w.handles, sized{h: h})
	}
}

func (w *world) rawMulticastCreate(a *args) {
	prop := cu.MulticastObjectProp{
		NumDevices:  of[uint32](a, 2, 1, uint32(w.devs), 0, uint32(w.devs)+1, 1<<31),
		Size:        a.size(w.gran),
		HandleTypes: uint64(of(a, cu.MEM_HANDLE_TYPE_NONE, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, cu.MEM_HANDLE_TYPE_FABRIC, 0x40)),
	}
	if a.n(16) == 0 {
		prop.Flags = 1
	}
	if a.n(4) == 0 {
		_, err := w.s.MulticastGranularity(&prop, cu.MulticastGranularityFlags(a.n(3)))
		w.check("raw MulticastGranularity", err, "cuMulticastGetGranularity")
		return
	}
	h, err := w.s.MulticastCreate(&prop)
	w.check("raw MulticastCreate", err, "cuMulticastCreate")
	if err == nil {
		put(w, &w.mcs, sized{h, prop.Size})
	}
}

func (w *world) rawMulticast(a *args) {
	mc := w.anyHandle(a)
	if x, ok := pick(w, a, &w.mcs); ok && a.n(4) != 0 {
		mc = x.h
	}
	mcOff := of[uint64](a, 0, 0, w.gran, 1, 1<<63)
	size := a.size(w.gran)
	flags := uint64(0)
	if a.n(16) == 0 {
		flags = 1
	}
	switch a.n(6) {
	case 0:
		w.check("raw MulticastAddDevice", w.s.MulticastAddDevice(mc, a.dev(w.devs)), "cuMulticastAddDevice")
	case 1:
		err := w.s.MulticastBindMem(mc, mcOff, w.anyHandle(a), of[uint64](a, 0, 0, w.gran, 1), size, flags)
		w.check("raw MulticastBindMem", err, "cuMulticastBindMem")
	case 2:
		err := w.s.MulticastBindAddr(mc, mcOff, w.anyAddr(a), size, flags)
		w.check("raw MulticastBindAddr", err, "cuMulticastBindAddr")
	case 3:
		err := w.s.MulticastUnbind(mc, a.dev(w.devs), mcOff, size)
		w.check("raw MulticastUnbind", err, "cuMulticastUnbind")
	case 4:
		err := w.s.MulticastBindMemV2(mc, a.dev(w.devs), mcOff, w.anyHandle(a), of[uint64](a, 0, 0, w.gran, 1), size, flags)
		w.check("raw MulticastBindMemV2", err, "cuMulticastBindMem_v2")
	default:
		err := w.s.MulticastBindAddrV2(mc, a.dev(w.devs), mcOff, w.anyAddr(a), size, flags)
		w.check("raw MulticastBindAddrV2", err, "cuMulticastBindAddr_v2")
	}
}

func (w *world) rawCopy(a *args) {
	dev, dst := a.dev(w.devs), w.anyAddr(a)
	switch a.n(4) {
	case 0:
		w.check("raw CopyHtoD", w.s.CopyHtoD(dev, dst, a.buf()), "cuMemcpyHtoD")
	case 1:
		w.check("raw CopyDtoH", w.s.CopyDtoH(dev, a.buf(), dst), "cuMemcpyDtoH")
	case 2:
		w.check("raw CopyDtoD", w.s.CopyDtoD(dev, dst, w.anyAddr(a), a.count()), "cuMemcpyDtoD")
	default:
		w.check("raw MemsetD8", w.s.MemsetD8(dev, dst, a.byte(), a.count()), "cuMemsetD8")
	}
}

func (w *world) rawPointer(a *args) {
	_, err := w.s.PointerAttributes(a.dev(w.devs), w.anyAddr(a))
	w.check("raw PointerAttributes", err, "cuPointerGetAttributes")
}

// --- faults, descriptors ---

func (w *world) armFault(a *args) {
	ops := sim.Ops()
	op := ops[a.n(len(ops))]
	n, r := 1+a.n(6), w.results(a)
	if trace != nil {
		trace(fmt.Sprintf("FailNth(%v, %d, %v)", op, n, r), nil)
	}
	if err := w.s.FailNth(op, n, r); err != nil {
		w.errorf("FailNth(%v): %v", op, err)
	}
}

func (w *world) clearFaults(a *args) {
	if a.n(4) == 0 {
		w.s.ClearFaults()
	}
}

func (w *world) closeDescriptor(a *args) {
	if fd, ok := take(w, a, &w.fds); ok {
		if err := closeFD(fd); err != nil {
			w.errorf("closing descriptor %d the run owns: %v", fd, err)
		}
	}
}
