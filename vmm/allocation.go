package vmm

import (
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
)

// Allocation is physical memory: created, imported or retained. Close releases this
// reference; memory still mapped stays until its last mapping is closed. Its methods are
// safe for concurrent use. Only a Manager makes one: a nil or zero Allocation fails every
// call with ErrInvalid.
type Allocation struct {
	m    *Manager
	h    cu.MemHandle
	size uint64
	l    life
	// shared: exported (a descriptor, a fabric handle, a dma-buf of its range) or
	// imported, so that another process or device may hold the memory.
	shared atomic.Bool
}

// Create allocates size bytes (a multiple of the granularity) of physical memory.
func (m *Manager) Create(size uint64, p Props) (*Allocation, error) {
	d := p.Driver()
	h, err := call(m, func(b Backend) (cu.MemHandle, error) {
		_ = m.orphans.Retry() // what is refused again stays listed; Pending says it
		return b.Create(size, &d, 0)
	})
	if err != nil {
		return nil, opErr(err, "create", "%s on %v", units.Size(size), p.Location)
	}
	return &Allocation{m: m, h: h, size: size}, nil
}

// releaseRetained releases a reference the Manager retained for a question of its own (the
// properties of what is mapped somewhere); a release the driver refuses goes to the
// Manager's Pending list, as nobody else holds the handle to retry it.
func (m *Manager) releaseRetained(h cu.MemHandle) error {
	err := m.b.Release(h)
	if err != nil {
		m.orphans.Add("release of a reference the Manager retained", func() error { return m.b.Release(h) })
	}
	return err
}

// Retain returns a new reference to the memory mapped at addr.
func (m *Manager) Retain(addr cu.DevicePtr) (*Allocation, error) {
	h, err := call(m, func(b Backend) (cu.MemHandle, error) { return b.Retain(addr) })
	if err != nil {
		return nil, opErr(err, "retain", "%v", addr)
	}
	// The driver reports no size for a handle; the range mapped at addr is the whole
	// allocation, since mappings cover whole allocations.
	size := uint64(0)
	if _, sz, err := m.b.AddressRange(addr); err == nil {
		size = sz
	}
	return &Allocation{m: m, h: h, size: size}, nil
}

// ImportFD imports memory exported by another process (or this one) as a POSIX file
// descriptor. The descriptor stays the caller's to close; the import does not need it
// afterwards. size is the allocation's size, as the exporter says it (the driver does not).
func (m *Manager) ImportFD(fd int, size uint64) (*Allocation, error) {
	h, err := call(m, func(b Backend) (cu.MemHandle, error) { return b.ImportFD(fd) })
	if err != nil {
		return nil, opErr(err, "import", "fd %d", fd)
	}
	return m.imported(h, size), nil
}

// ImportFabric imports memory from a fabric handle.
func (m *Manager) ImportFabric(fh cu.MemFabricHandle, size uint64) (*Allocation, error) {
	h, err := call(m, func(b Backend) (cu.MemHandle, error) { return b.ImportFabric(fh) })
	if err != nil {
		return nil, opErr(err, "import", "fabric handle")
	}
	return m.imported(h, size), nil
}

func (m *Manager) imported(h cu.MemHandle, size uint64) *Allocation {
	a := &Allocation{m: m, h: h, size: size}
	a.shared.Store(true)
	return a
}

// Shared reports whether the memory was exported (as a file descriptor, a fabric handle or
// in a dma-buf), bound to a multicast object (Multicast.Bind; memory bound by address with
// BindAddress is not known here), or imported: another process or device may hold it, so
// releasing this reference frees nothing, and memory put in its place would not be what
// the other side sees. Package sleep refuses such memory.
//
// It knows what was done through this Allocation, or by an export that names it: a
// dma-buf of a Reservation's range, of a buffer, or of chunks that list it. It does not
// know an export by address alone (Manager.ExportDmaBuf) or through another Allocation of
// the same memory (Manager.Retain): export memory that may sleep through its owner.
func (a *Allocation) Shared() bool { return a != nil && a.shared.Load() }

// Handle is the backend's handle value, for calls the typed layer does not cover (0 for a
// nil Allocation).
func (a *Allocation) Handle() cu.MemHandle {
	if a == nil {
		return 0
	}
	return a.h
}

// Size is the allocation's size in bytes (0 when unknown, for retained memory on a backend
// that cannot tell, and for a nil Allocation).
func (a *Allocation) Size() uint64 {
	if a == nil {
		return 0
	}
	return a.size
}

var errNoAllocation = invalid("a nil or zero Allocation (make one with a Manager)")

// enter pins a for one operation: nil when it may go on, or why not.
func (a *Allocation) enter() error {
	if a == nil || !a.m.usable() {
		return errNoAllocation
	}
	return a.l.enter()
}

// Properties returns what the allocation was created with, as the driver reports it.
func (a *Allocation) Properties() (cu.MemAllocationProp, error) {
	if err := a.enter(); err != nil {
		return cu.MemAllocationProp{}, opErr(err, "properties", "%v", a.Handle())
	}
	defer a.l.exit()
	p, err := a.m.b.Properties(a.h)
	if err != nil {
		return p, opErr(err, "properties", "%v", a.h)
	}
	return p, nil
}

// Props returns what the allocation was created with as Props, from Properties: what
// creating memory like it takes.
func (a *Allocation) Props() (Props, error) {
	d, err := a.Properties()
	return Props{
		Location:      d.Location,
		HandleTypes:   d.RequestedHandleTypes,
		Compressible:  d.CompressionType == cu.MEM_ALLOCATION_COMP_GENERIC,
		GPUDirectRDMA: d.GPUDirectRDMACapable != 0,
		Usage:         d.Usage,
	}, err
}

// Compressible reports whether the driver really made the memory compressible (asking is
// only a hint).
func (a *Allocation) Compressible() (bool, error) {
	p, err := a.Properties()
	return p.CompressionType == cu.MEM_ALLOCATION_COMP_GENERIC, err
}

// ExportFD exports the allocation as a POSIX file descriptor, which the caller owns and
// must close. The allocation must have been created with MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
func (a *Allocation) ExportFD() (int, error) {
	if err := a.enter(); err != nil {
		return -1, opErr(err, "export", "%v as fd", a.Handle())
	}
	defer a.l.exit()
	fd, err := a.m.b.ExportFD(a.h)
	if err != nil {
		return fd, opErr(err, "export", "%v as fd", a.h)
	}
	a.shared.Store(true)
	return fd, nil
}

// ExportFabric exports the allocation as a fabric handle (MEM_HANDLE_TYPE_FABRIC).
func (a *Allocation) ExportFabric() (cu.MemFabricHandle, error) {
	if err := a.enter(); err != nil {
		return cu.MemFabricHandle{}, opErr(err, "export", "%v as fabric handle", a.Handle())
	}
	defer a.l.exit()
	fh, err := a.m.b.ExportFabric(a.h)
	if err != nil {
		return fh, opErr(err, "export", "%v as fabric handle", a.h)
	}
	a.shared.Store(true)
	return fh, nil
}

// Close releases this reference once the operations in flight on the allocation (exports,
// maps of it) have finished. It is idempotent.
func (a *Allocation) Close() error {
	if a == nil || !a.m.usable() {
		return opErr(errNoAllocation, "release", "%v", a.Handle())
	}
	return a.l.close(func() error {
		if err := a.m.b.Release(a.h); err != nil {
			return opErr(err, "release", "%v", a.h)
		}
		return nil
	})
}
