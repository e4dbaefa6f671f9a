package vmm

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
)

// dma-buf export: a file descriptor for a range of device memory that another driver
// imports, an RDMA NIC above all (ibv_reg_dmabuf_mr, fi_mr_regattr with FI_MR_DMABUF). The
// driver call is cuMemGetHandleForAddressRange, and the rules the driver keeps (recorded
// on H200s with driver 580: vmmtest dmabuf/) are checked here before it is asked, so that a
// refusal says which one the range breaks:
//
//   - the address and size are multiples of the host page size (ErrMisaligned);
//   - every byte of the range is mapped (ErrHole);
//   - the memory behind it is resident on one device (ErrMixedDevices), not the host
//     (ErrUnsupported), and not compressible (ErrUnsupported: the driver fails with
//     CUDA_ERROR_UNKNOWN);
//   - the device supports dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED; ErrUnsupported).
//
// The header also asks for identical allocation properties, which the driver does not
// enforce (see DmaBuf.Props).
//
// The extent is the whole range asked for, however many mappings back it. The mistake this
// API exists to prevent is taking the extent from cuMemGetAddressRange, which returns one
// mapping: a buffer made of several chunks is then registered up to the end of its first.
//
// The descriptor describes the memory mapped when it was made: after a remap (other
// memory mapped at the same addresses, or a buffer moved) it describes the old memory, and
// a new one must be exported (buffer.Buffer.Stale says when). dma-bufs are Linux only:
// elsewhere every export fails with ErrUnsupported.

// The rules of a dma-buf export. Each error a refused export returns wraps one of them
// with what broke it; they match ErrInvalid and cu.ERROR_INVALID_VALUE, what a driver
// that checks returns.
var (
	// ErrHole: part of the range is not mapped.
	ErrHole error = &matching{"a hole: part of the range is not mapped", []error{ErrInvalid, cu.ERROR_INVALID_VALUE}}
	// ErrMixedDevices: the memory behind the range is resident on more than one device
	// (or on a device and the host).
	ErrMixedDevices error = &matching{"memory of more than one device", []error{ErrInvalid, cu.ERROR_INVALID_VALUE}}
	// ErrMisaligned: the address or the size is not a multiple of the host page size.
	ErrMisaligned error = &matching{"not aligned to the host page size", []error{ErrInvalid, cu.ERROR_INVALID_VALUE}}
)

// hostPageSize is what the range of a dma-buf is aligned to.
var hostPageSize = uint64(os.Getpagesize())

// DmaBuf is a dma-buf file descriptor for a range of device memory, and what it was
// exported from. It owns the descriptor until Close or Take; the zero DmaBuf holds none.
// Its methods are safe for concurrent use: Close and Take wait for the calls of Use in
// flight.
type DmaBuf struct {
	// Addr and Size are the range exported: the whole of it, all its chunks.
	Addr cu.DevicePtr
	Size uint64
	// Device is the device the memory is resident on.
	Device int
	// Props are the allocation properties of the range's first chunk, as the driver reports
	// them (later chunks may differ in GPUDirect RDMA capability and shareable handle types).
	Props cu.MemAllocationProp
	// Chunks is the number of mappings behind the range.
	Chunks int
	// PCIe says the export asked for a mapping through PCIe BAR1 (ViaPCIe).
	PCIe bool
	// Generation is the exporter's count of the changes that make earlier descriptors
	// describe old memory, when it keeps one (buffer.Buffer: see its Stale); 0 otherwise.
	Generation uint64

	l   life         // the calls of Use in flight; Take (and Close) end it
	fd1 atomic.Int64 // the descriptor + 1, so that the zero DmaBuf holds none (not stdin); 0 when none
}

// NewDmaBuf wraps a dma-buf descriptor, which the DmaBuf then owns, with what is known of
// it: for descriptors that arrive otherwise than from an export of this process (received
// from another process, package ipc).
func NewDmaBuf(fd int, addr cu.DevicePtr, size uint64) *DmaBuf {
	d := &DmaBuf{Addr: addr, Size: size, Device: -1}
	if fd >= 0 {
		d.fd1.Store(int64(fd) + 1)
	}
	return d
}

// FD returns the descriptor, still owned by d: -1 after Close or Take. Another goroutine's
// Close may close it as soon as FD returns; Use holds it open.
func (d *DmaBuf) FD() int {
	if d == nil {
		return -1
	}
	return int(d.fd1.Load()) - 1
}

// Use calls f with the descriptor, which stays open and d's until f returns: Close and
// Take wait for it. f must neither close the descriptor nor keep it, and must not Close or
// Take d (they would wait for f); d's other methods are fine. Use returns f's error, or
// ErrClosed when d holds no descriptor.
func (d *DmaBuf) Use(f func(fd int) error) error {
	if d == nil {
		return opErr(invalid("a nil DmaBuf"), "use dma-buf", "")
	}
	if err := d.l.enter(); err != nil {
		return err
	}
	defer d.l.exit()
	fd1 := d.fd1.Load()
	if fd1 == 0 {
		return ErrClosed
	}
	return f(int(fd1) - 1)
}

// Take hands the descriptor to the caller, who must close it (a C library that takes
// ownership, say); d no longer owns it, and FD returns -1. It returns -1 after Close or
// another Take.
func (d *DmaBuf) Take() int {
	if d == nil {
		return -1
	}
	fd := -1
	_ = d.l.close(func() error {
		fd = int(d.fd1.Swap(0)) - 1
		return nil
	})
	return fd
}

// Close closes the descriptor. It is idempotent. What a NIC registered through it stays
// registered: the kernel keeps the dma-buf until the registration ends too.
func (d *DmaBuf) Close() error {
	if d == nil {
		return opErr(invalid("a nil DmaBuf"), "close dma-buf", "")
	}
	fd := d.Take()
	if fd < 0 {
		return nil
	}
	if err := os.NewFile(uintptr(fd), "dma-buf").Close(); err != nil {
		return opErr(err, "close dma-buf", "fd %d", fd)
	}
	return nil
}

func (d *DmaBuf) String() string {
	if d == nil {
		return "dma-buf <nil>"
	}
	s := fmt.Sprintf("dma-buf fd %d: %s", d.FD(), rangeArgs(d.Addr, d.Size))
	if d.Device >= 0 {
		s += fmt.Sprintf(" of device %d", d.Device)
	}
	if d.Chunks > 0 {
		s += fmt.Sprintf(", %d chunk(s)", d.Chunks)
	}
	if d.PCIe {
		s += ", via PCIe"
	}
	return s
}

// DmaBufOption adjusts a dma-buf export.
type DmaBufOption func(*dmaBufOpts)

type dmaBufOpts struct {
	pcie bool
}

// ViaPCIe asks for a dma-buf the importer reaches through the device's PCIe BAR1
// (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE): on platforms where a NIC could reach GPU
// memory by another path too (a coherent CPU-GPU link), it picks PCIe. The driver refuses
// it with cu.ERROR_NOT_SUPPORTED where the platform does not offer it, as on x86 hosts with
// H100 and H200 GPUs (recorded: vmmtest dmabuf/pcie); no device attribute says which do.
func ViaPCIe() DmaBufOption { return func(o *dmaBufOpts) { o.pcie = true } }

// DmaBufChunk is one mapping behind a range to export, for building blocks that know their
// layout (package buffer, package sparse): its extent and the properties of its memory as
// the driver reports them (Allocation.Properties).
type DmaBufChunk struct {
	Addr  cu.DevicePtr
	Size  uint64
	Props cu.MemAllocationProp
	// Alloc, when known, is the chunk's memory: an export marks it Shared.
	Alloc *Allocation
}

func (c DmaBufChunk) end() cu.DevicePtr { return c.Addr + cu.DevicePtr(c.Size) }

// DmaBufSupported reports whether device dev can export dma-bufs
// (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED; false everywhere but Linux).
func (m *Manager) DmaBufSupported(dev int) (bool, error) {
	v, err := m.Attribute(dev, cu.DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
	if err != nil {
		return false, err
	}
	return v != 0 && runtime.GOOS == "linux", nil
}

// ExportDmaBuf exports the device memory [addr, addr+size) as a dma-buf, whatever made it:
// the mappings behind the range are found with cuMemGetAddressRange, one after another to
// the end of the range (each call returns one mapping), and their properties through
// cuMemRetainAllocationHandle. Only mappings some device may access are found: memory
// mapped with no access reads as a hole. The layout is read again after the export and, if
// it changed meanwhile (another goroutine remapped the range), the export is made again, up
// to three times, so that the DmaBuf says what its descriptor holds. Where the layout is
// known, Reservation.ExportDmaBuf and ExportDmaBufChunks cost fewer calls.
func (m *Manager) ExportDmaBuf(addr cu.DevicePtr, size uint64, opts ...DmaBufOption) (*DmaBuf, error) {
	o := options(opts)
	if err := m.checkDmaBufRange(addr, size); err != nil {
		return nil, dmaBufErr(err, addr, size, o)
	}
	// Nothing here keeps whoever mapped the range from remapping it between the reading of
	// its layout and the export: hence the reading after.
	const tries = 3
	for range tries {
		chunks, err := m.chunksAt(addr, size)
		if err != nil {
			return nil, dmaBufErr(err, addr, size, o)
		}
		d, err := m.exportDmaBuf(addr, size, chunks, o)
		if err != nil {
			return nil, dmaBufErr(err, addr, size, o)
		}
		after, err := m.chunksAt(addr, size)
		if err == nil && slices.Equal(chunks, after) {
			return d, nil
		}
		if cerr := d.Close(); cerr != nil {
			return nil, dmaBufErr(errors.Join(err, cerr), addr, size, o)
		}
	}
	return nil, dmaBufErr(fmt.Errorf("the mappings behind the range changed while it was exported, %d times running: "+
		"export it while nothing remaps it", tries), addr, size, o)
}

// ExportDmaBufChunks exports [addr, addr+size) as a dma-buf, checking the rules against
// chunks: the mappings behind the range, in address order (they may extend past its ends).
// The driver has the last word: chunks that misdescribe the memory pass the checks and
// the driver refuses.
func (m *Manager) ExportDmaBufChunks(addr cu.DevicePtr, size uint64, chunks []DmaBufChunk, opts ...DmaBufOption) (*DmaBuf, error) {
	o := options(opts)
	d, err := m.exportDmaBuf(addr, size, chunks, o)
	return d, dmaBufErr(err, addr, size, o)
}

// ExportDmaBuf exports the size bytes at offset off of the reservation as a dma-buf: every
// mapping of the range (several allocations in a row make one descriptor). The mappings
// are those made through r; maps, Unmap and Mapping.Close of r wait for the export, so
// that what the DmaBuf says (device, properties, chunks) is what its descriptor holds.
func (r *Reservation) ExportDmaBuf(off, size uint64, opts ...DmaBufOption) (*DmaBuf, error) {
	o := options(opts)
	addr := r.Base() + cu.DevicePtr(off)
	if err := r.enter(off, size); err != nil {
		return nil, dmaBufErr(err, addr, size, o)
	}
	defer r.l.exit()
	if err := r.m.checkDmaBufRange(addr, size); err != nil {
		return nil, dmaBufErr(err, addr, size, o)
	}
	r.ranges.Lock()
	defer r.ranges.Unlock()
	r.mu.Lock()
	var maps []*Mapping
	for _, mp := range r.maps {
		if mp.end() > addr && mp.addr < addr+cu.DevicePtr(size) && !mp.l.closed() {
			maps = append(maps, mp)
		}
	}
	r.mu.Unlock()
	chunks := make([]DmaBufChunk, 0, len(maps))
	for _, mp := range maps {
		p, err := r.m.propsAt(mp.addr)
		if err != nil {
			return nil, dmaBufErr(err, addr, size, o)
		}
		chunks = append(chunks, DmaBufChunk{Addr: mp.addr, Size: mp.size, Props: p, Alloc: mp.a})
	}
	d, err := r.m.exportDmaBuf(addr, size, chunks, o)
	return d, dmaBufErr(err, addr, size, o)
}

// options applies opts (nil ones skipped) to zero options: ReserveOption's, DmaBufOption's.
func options[O any, F ~func(*O)](opts []F) O {
	var o O
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

func dmaBufErr(err error, addr cu.DevicePtr, size uint64, o dmaBufOpts) error {
	if err == nil {
		return nil
	}
	args := rangeArgs(addr, size)
	if o.pcie {
		args += " via PCIe"
	}
	return &Error{Op: "export dma-buf", Args: args, Err: err}
}

// checkDmaBufRange checks what needs no driver: a backend, the platform, a size, the
// alignment.
func (m *Manager) checkDmaBufRange(addr cu.DevicePtr, size uint64) error {
	switch {
	case !m.usable():
		return errNoBackend
	case runtime.GOOS != "linux":
		return fmt.Errorf("%w: dma-buf descriptors are Linux only", ErrUnsupported)
	case size == 0:
		return invalid("size 0")
	case uint64(addr)+size < uint64(addr):
		return invalid("the range wraps around the address space")
	case uint64(addr)%hostPageSize != 0:
		return fmt.Errorf("%w: address %v is not a multiple of the host page size (%s)", ErrMisaligned, addr, units.Size(hostPageSize))
	case size%hostPageSize != 0:
		return fmt.Errorf("%w: size %s is not a multiple of the host page size (%s)", ErrMisaligned, units.Size(size), units.Size(hostPageSize))
	}
	return nil
}

// exportDmaBuf checks the rules against chunks and exports.
func (m *Manager) exportDmaBuf(addr cu.DevicePtr, size uint64, chunks []DmaBufChunk, o dmaBufOpts) (*DmaBuf, error) {
	if err := m.checkDmaBufRange(addr, size); err != nil {
		return nil, err
	}
	end := addr + cu.DevicePtr(size)
	next := addr // the first byte not yet seen mapped
	var first *DmaBufChunk
	n := 0
	for i := range chunks {
		c := &chunks[i]
		if c.end() <= next || c.Addr >= end {
			continue
		}
		if c.Addr > next {
			return nil, fmt.Errorf("%w: %s (offset %s of the range) is not mapped", ErrHole, rangeArgs(next, uint64(c.Addr-next)), units.Size(uint64(next-addr)))
		}
		at := func() string {
			a := max(c.Addr, addr)
			return fmt.Sprintf("the chunk at %v (offset %s of the range)", a, units.Size(uint64(a-addr)))
		}
		switch {
		case first == nil:
			first = c
		case c.Props.Location != first.Props.Location:
			return nil, fmt.Errorf("%w: %s is memory of %v, the range starts with memory of %v", ErrMixedDevices, at(), c.Props.Location, first.Props.Location)
		}
		if c.Props.CompressionType != cu.MEM_ALLOCATION_COMP_NONE {
			return nil, fmt.Errorf("%w: %s is compressible memory, which the driver does not export as a dma-buf (it fails with %s)", ErrUnsupported, at(), cu.ERROR_UNKNOWN.Name())
		}
		n++
		next = c.end()
	}
	if next < end {
		return nil, fmt.Errorf("%w: %s (offset %s of the range) is not mapped", ErrHole, rangeArgs(next, uint64(end-next)), units.Size(uint64(next-addr)))
	}
	loc := first.Props.Location
	if loc.Type != cu.MEM_LOCATION_TYPE_DEVICE {
		return nil, fmt.Errorf("%w: the range is memory of %v; the driver exports dma-bufs of device memory only (it fails with %s)", ErrUnsupported, loc, cu.ERROR_INVALID_VALUE.Name())
	}
	dev := int(loc.ID)
	ok, err := m.DmaBufSupported(dev)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: device %d cannot export dma-bufs (%v is 0)", ErrUnsupported, dev, cu.DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
	}
	var flags uint64
	if o.pcie {
		flags = cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE
	}
	fd, err := m.b.ExportDmaBuf(addr, size, flags)
	if err != nil {
		if o.pcie && errors.Is(err, cu.ERROR_NOT_SUPPORTED) {
			err = errors.Join(err, errors.New("the platform may not offer a dma-buf mapping through PCIe BAR1: export without ViaPCIe"))
		}
		return nil, err
	}
	for _, c := range chunks {
		if c.Alloc != nil && c.end() > addr && c.Addr < end {
			c.Alloc.shared.Store(true)
		}
	}
	d := &DmaBuf{Addr: addr, Size: size, Device: dev, Props: first.Props, Chunks: n, PCIe: o.pcie}
	d.fd1.Store(int64(fd) + 1)
	return d, nil
}

// propsAt returns the properties of the memory mapped at addr: those of the handle it was
// mapped through, retained for the question and released again.
func (m *Manager) propsAt(addr cu.DevicePtr) (cu.MemAllocationProp, error) {
	h, err := m.b.Retain(addr)
	if err != nil {
		return cu.MemAllocationProp{}, opErr(err, "retain", "%v", addr)
	}
	p, err := m.b.Properties(h)
	if err != nil {
		err = opErr(err, "properties", "of the memory at %v", addr)
	}
	if rerr := m.releaseRetained(h); rerr != nil {
		err = errors.Join(err, opErr(rerr, "release", "%v (kept in the Manager's Pending list)", h))
	}
	return p, err
}

// chunksAt finds the mappings behind [addr, addr+size) with cuMemGetAddressRange.
func (m *Manager) chunksAt(addr cu.DevicePtr, size uint64) ([]DmaBufChunk, error) {
	var chunks []DmaBufChunk
	end := addr + cu.DevicePtr(size)
	for p := addr; p < end; {
		base, sz, err := m.b.AddressRange(p)
		if errors.Is(err, cu.ERROR_NOT_FOUND) {
			return nil, fmt.Errorf("%w: nothing that a device may access is mapped at %v (offset %s of the range)", ErrHole, p, units.Size(uint64(p-addr)))
		}
		if err != nil {
			return nil, opErr(err, "address range", "%v", p)
		}
		if sz == 0 || base > p || base+cu.DevicePtr(sz) <= p {
			return nil, fmt.Errorf("the driver's address range %s does not hold %v", rangeArgs(base, sz), p)
		}
		props, err := m.propsAt(p)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, DmaBufChunk{Addr: base, Size: sz, Props: props})
		p = base + cu.DevicePtr(sz)
	}
	return chunks, nil
}
