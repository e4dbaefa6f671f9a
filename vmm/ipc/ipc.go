// Package ipc shares device memory between processes: exported allocations travel as file
// descriptors over a Unix domain socket (SCM_RIGHTS, Linux), and fabric handles travel as
// plain values over any transport.
//
// # Descriptors
//
// One message carries a small header (Header: the allocations' sizes, their granularity
// and handle type) and the descriptors, one per allocation. Who owns which descriptor is
// explicit, and nothing leaks on any error path:
//
//   - Export creates descriptors; the *Exported owns them until its Close.
//   - Send never takes ownership: the kernel passes copies, the sender keeps its own.
//   - Receive returns a *Received that owns the descriptors it got (also on error: then it
//     has closed them); its Close closes them.
//   - Import does not take ownership (the driver does not need the descriptor once the
//     memory is imported); ReceiveAndImport closes what it received before it returns.
//
// The receiver imports each allocation, maps them one after another in one reservation and
// grants its devices access in one call (Imported).
//
// # Trust
//
// Everything that comes from the other process is checked before it is used. Receive
// takes no more descriptors than the protocol allows (MaxDescriptors, then the count the
// header announces) and refuses a header at its first wrong byte. The importer aligns its
// reservation to its own granularity, not the peer's; it checks each claimed size against
// the granularity and the memory of the device the imported allocation lives on, as the
// driver reports them, and the driver itself maps whole allocations only, so a size that
// is not the allocation's is refused when it is mapped.
//
// # Fabric handles
//
// FabricHandle is a fabric handle with the allocation's size, a value that implements
// encoding.BinaryMarshaler and encoding.TextMarshaler (and the Unmarshalers), so that it
// can be sent in JSON, gRPC or an environment variable to a process on another node of the
// same NVLink fabric. Creating fabric memory needs an IMEX channel.
package ipc

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/guard"
	"github.com/cuvmm/cuvmm/vmm"
)

var (
	// ErrUnsupported is returned by Send and Receive where SCM_RIGHTS is not available
	// (every platform but Linux).
	ErrUnsupported = errors.New("ipc: descriptor passing is not supported on this platform")
	// ErrProtocol is returned for a message that is not a valid header and descriptors.
	ErrProtocol = errors.New("ipc: protocol error")
	// ErrClosed is returned by operations after Close.
	ErrClosed = errors.New("ipc: closed")
	// ErrInvalid is returned for invalid arguments.
	ErrInvalid = errors.New("ipc: invalid argument")
	// ErrOutOfRange is returned for copies outside the imported memory.
	ErrOutOfRange = errors.New("ipc: out of range")
)

// Error is the error of a failed operation; it unwraps to the cause.
type Error struct {
	Op   string // "export", "send", "receive", "import", "close", ...
	Args string
	Err  error
}

func (e *Error) Error() string {
	s := "ipc: " + e.Op
	if e.Args != "" {
		s += " " + e.Args
	}
	return s + ": " + strings.TrimPrefix(e.Err.Error(), "ipc: ")
}

func (e *Error) Unwrap() error { return e.Err }

// MaxDescriptors is the most allocations one message carries: Linux passes at most 253
// descriptors in one message (SCM_MAX_FD).
const MaxDescriptors = 253

// Header is what a message says about the descriptors it carries.
type Header struct {
	// HandleType is the shareable handle type of the descriptors
	// (cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR).
	HandleType cu.MemHandleType
	// Granularity is the exporter's allocation granularity: every size is a multiple of it.
	// The importer does not rely on it: it checks the sizes against its own granularity.
	Granularity uint64
	// Sizes are the allocations' sizes, one per descriptor, in order (the driver does not
	// tell an importer the size).
	Sizes []uint64
}

// Total is the sum of the sizes.
func (h Header) Total() uint64 {
	var t uint64
	for _, s := range h.Sizes {
		t += s
	}
	return t
}

const (
	headerMagic   = "CUVMMIPC"
	headerVersion = 1
	headerFixed   = 24 // magic 8, version 2, handle type 2, count 2, reserved 2, granularity 8
	headerCountAt = 12 // the count is known once this many bytes and two more arrived
	maxHeaderLen  = headerFixed + 8*MaxDescriptors
)

// validate checks what any receiver needs to hold: a sane count, sizes that are non-zero
// multiples of the granularity, a total that does not overflow.
func (h Header) validate() error {
	if n := len(h.Sizes); n == 0 || n > MaxDescriptors {
		return fmt.Errorf("%w: %d descriptors (1 to %d)", ErrProtocol, n, MaxDescriptors)
	}
	if h.HandleType != cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR {
		return fmt.Errorf("%w: handle type %d (only POSIX file descriptors travel over a socket)", ErrProtocol, h.HandleType)
	}
	g := h.Granularity
	if g == 0 || g&(g-1) != 0 {
		return fmt.Errorf("%w: granularity %d is not a power of two", ErrProtocol, g)
	}
	var total uint64
	for i, s := range h.Sizes {
		if s == 0 || s%g != 0 {
			return fmt.Errorf("%w: size %d of allocation %d is not a non-zero multiple of the granularity %d", ErrProtocol, s, i, g)
		}
		if total+s < total {
			return fmt.Errorf("%w: sizes overflow", ErrProtocol)
		}
		total += s
	}
	return nil
}

// MarshalBinary encodes the header as it travels: little-endian, versioned.
func (h Header) MarshalBinary() ([]byte, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, headerFixed+8*len(h.Sizes))
	copy(b, headerMagic)
	binary.LittleEndian.PutUint16(b[8:], headerVersion)
	binary.LittleEndian.PutUint16(b[10:], uint16(h.HandleType))
	binary.LittleEndian.PutUint16(b[12:], uint16(len(h.Sizes)))
	binary.LittleEndian.PutUint64(b[16:], h.Granularity)
	for i, s := range h.Sizes {
		binary.LittleEndian.PutUint64(b[headerFixed+8*i:], s)
	}
	return b, nil
}

// UnmarshalBinary decodes and validates a header.
func (h *Header) UnmarshalBinary(b []byte) error {
	n, err := headerLen(b)
	if err != nil {
		return err
	}
	if len(b) != n {
		return fmt.Errorf("%w: header of %d bytes, want %d", ErrProtocol, len(b), n)
	}
	d := Header{
		HandleType:  cu.MemHandleType(binary.LittleEndian.Uint16(b[10:])),
		Granularity: binary.LittleEndian.Uint64(b[16:]),
		Sizes:       make([]uint64, (n-headerFixed)/8),
	}
	for i := range d.Sizes {
		d.Sizes[i] = binary.LittleEndian.Uint64(b[headerFixed+8*i:])
	}
	if err := d.validate(); err != nil {
		return err
	}
	*h = d
	return nil
}

// headerLen reads the fixed part and returns the whole header's length.
func headerLen(b []byte) (int, error) {
	count, err := checkPrefix(b)
	if err != nil {
		return 0, err
	}
	if len(b) < headerFixed {
		return 0, fmt.Errorf("%w: header of %d bytes, want at least %d", ErrProtocol, len(b), headerFixed)
	}
	return headerFixed + 8*count, nil
}

// checkPrefix checks the fixed part of a header as far as b holds it, so that a receiver
// reading a stream refuses a bad header at its first wrong byte. It returns the descriptor
// count once b holds it, 0 before.
func checkPrefix(b []byte) (count int, err error) {
	if n := min(len(b), len(headerMagic)); string(b[:n]) != headerMagic[:n] {
		return 0, fmt.Errorf("%w: bad magic %q", ErrProtocol, b[:n])
	}
	if len(b) >= 10 {
		if v := binary.LittleEndian.Uint16(b[8:]); v != headerVersion {
			return 0, fmt.Errorf("%w: version %d, want %d", ErrProtocol, v, headerVersion)
		}
	}
	if len(b) >= headerCountAt+2 {
		count = int(binary.LittleEndian.Uint16(b[headerCountAt:]))
		if count == 0 || count > MaxDescriptors {
			return 0, fmt.Errorf("%w: %d descriptors (1 to %d)", ErrProtocol, count, MaxDescriptors)
		}
	}
	if len(b) >= 16 {
		if r := binary.LittleEndian.Uint16(b[14:]); r != 0 {
			return 0, fmt.Errorf("%w: reserved bytes %#04x, want 0", ErrProtocol, r)
		}
	}
	return count, nil
}

// Exported is a set of allocations exported as POSIX file descriptors, ready to Send. It
// owns the descriptors until Close.
type Exported struct {
	Header Header
	mu     sync.Mutex
	fds    []int
}

// FDs returns the descriptors, still owned by e (nil after Close).
func (e *Exported) FDs() []int {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.fds...)
}

// Close closes the descriptors. It is idempotent.
func (e *Exported) Close() error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	fds := e.fds
	e.fds = nil
	if err := closeFDs(fds); err != nil {
		return &Error{Op: "close", Args: "exported descriptors", Err: err}
	}
	return nil
}

// Export exports allocations made with cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in their
// props, in the order they will be mapped by the importer.
func Export(m *vmm.Manager, allocs ...*vmm.Allocation) (*Exported, error) {
	hs := make([]cu.MemHandle, len(allocs))
	sizes := make([]uint64, len(allocs))
	for i, a := range allocs {
		if a == nil {
			return nil, &Error{Op: "export", Args: fmt.Sprintf("%d allocations", len(allocs)), Err: fmt.Errorf("%w: allocation %d is nil", ErrInvalid, i)}
		}
		hs[i], sizes[i] = a.Handle(), a.Size()
	}
	return ExportHandles(m, hs, sizes)
}

// ExportHandles exports raw allocation handles (a growable buffer's chunks, say) of the
// given sizes. The handles stay the caller's.
func ExportHandles(m *vmm.Manager, handles []cu.MemHandle, sizes []uint64) (*Exported, error) {
	args := fmt.Sprintf("%d allocations", len(handles))
	fail := func(err error) (*Exported, error) { return nil, &Error{Op: "export", Args: args, Err: err} }
	if m == nil || m.Backend() == nil {
		return fail(fmt.Errorf("%w: nil Manager", ErrInvalid))
	}
	if len(handles) != len(sizes) {
		return fail(fmt.Errorf("%w: %d handles, %d sizes", ErrInvalid, len(handles), len(sizes)))
	}
	if len(handles) == 0 || len(handles) > MaxDescriptors {
		return fail(fmt.Errorf("%w: 1 to %d allocations", ErrInvalid, MaxDescriptors))
	}
	b := m.Backend()
	prop, err := b.Properties(handles[0])
	if err != nil {
		return fail(vmm.Call(err, "properties of %v", handles[0]))
	}
	g, err := b.Granularity(&cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: prop.Location}, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
	if err != nil {
		return fail(vmm.Call(err, "granularity"))
	}
	h := Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: g, Sizes: append([]uint64(nil), sizes...)}
	if err := h.validate(); err != nil {
		return fail(err)
	}
	e := &Exported{Header: h}
	for _, hd := range handles {
		fd, err := b.ExportFD(hd)
		if err != nil {
			return fail(errors.Join(vmm.Call(err, "export %v as fd", hd), closeFDs(e.fds)))
		}
		e.fds = append(e.fds, fd)
	}
	return e, nil
}

// Received is a header and the descriptors that came with it. It owns the descriptors
// until Close.
type Received struct {
	Header Header
	mu     sync.Mutex
	fds    []int
}

// FDs returns the descriptors, still owned by r (nil after Close).
func (r *Received) FDs() []int {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.fds...)
}

// Close closes the descriptors. It is idempotent.
func (r *Received) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fds := r.fds
	r.fds = nil
	if err := closeFDs(fds); err != nil {
		return &Error{Op: "close", Args: "received descriptors", Err: err}
	}
	return nil
}

// Imported is memory of another process, mapped in this one: the allocations of a
// message one after another in one reservation, accessible from the devices it was
// imported for. It is safe for concurrent use: copies run alongside each other, and Close
// waits for those in flight.
type Imported struct {
	g       guard.Guard // copies in flight; Close drains them
	mu      sync.Mutex  // serializes Close
	b       vmm.Backend
	base    cu.DevicePtr
	size    uint64
	handles []cu.MemHandle
	dev     int
	closed  bool
	pending []func() error
}

// Import imports the descriptors r carries, maps them in one reservation and grants the
// devices of access read-write access in one call (the first is the one copies use; nil
// means device 0). The descriptors stay r's. On error nothing is left imported, reserved
// or mapped, unless the driver refuses to undo a step too: the error then names each step
// it refused, and what that step held stays.
//
// The sizes in r's header are the peer's claims: each must be a non-zero multiple of the
// granularity of the device its allocation lives on, the allocations of one device may
// not claim more than its memory, and the driver refuses to map a size that is not the
// allocation's. The error of a refused claim names the allocation and its claimed size.
func Import(m *vmm.Manager, r *Received, access []int) (*Imported, error) {
	if r == nil {
		return nil, &Error{Op: "import", Err: fmt.Errorf("%w: nil Received", ErrInvalid)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	args := fmt.Sprintf("%d descriptors, %s claimed", len(r.fds), claimedTotal(r.Header.Sizes))
	if len(r.fds) == 0 {
		return nil, &Error{Op: "import", Args: args, Err: ErrClosed}
	}
	if len(r.fds) != len(r.Header.Sizes) {
		return nil, &Error{Op: "import", Args: args, Err: fmt.Errorf("%w: %d descriptors for %d sizes", ErrProtocol, len(r.fds), len(r.Header.Sizes))}
	}
	imp, err := mapHandles(m, r.Header.Sizes, access,
		func(i int) string { return fmt.Sprintf("allocation %d (fd %d)", i, r.fds[i]) },
		func(b vmm.Backend, i int) (cu.MemHandle, error) {
			h, err := b.ImportFD(r.fds[i])
			return h, vmm.Call(err, "import allocation %d (fd %d)", i, r.fds[i])
		})
	if err != nil {
		return nil, &Error{Op: "import", Args: args, Err: err}
	}
	return imp, nil
}

// claimedTotal formats the sum of sizes for messages, which may not fit 64 bits.
func claimedTotal(sizes []uint64) string {
	var t uint64
	for _, s := range sizes {
		if t+s < t {
			return "more than 2^64 bytes"
		}
		t += s
	}
	return vmm.Size(t)
}

// mapHandles imports len(sizes) handles with get, checks each claimed size against what
// the backend says of the imported memory, reserves their total aligned to the largest
// granularity, maps each whole at its offset and grants access, undoing everything on
// failure. name(i) names allocation i in errors.
func mapHandles(m *vmm.Manager, sizes []uint64, access []int, name func(int) string, get func(vmm.Backend, int) (cu.MemHandle, error)) (*Imported, error) {
	if m == nil || m.Backend() == nil {
		return nil, fmt.Errorf("%w: nil Manager", ErrInvalid)
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("%w: nothing to import", ErrInvalid)
	}
	if len(access) == 0 {
		access = []int{0}
	}
	// What needs no driver call first: nothing is imported for a claim that cannot be true.
	var total uint64
	for i, s := range sizes {
		if s == 0 {
			return nil, fmt.Errorf("%w: %s claims size 0", ErrProtocol, name(i))
		}
		if total+s < total {
			return nil, fmt.Errorf("%w: sizes overflow at %s, which claims %s", ErrProtocol, name(i), vmm.Size(s))
		}
		total += s
	}
	b := m.Backend()
	imp := &Imported{b: b, size: total, dev: access[0]}
	var undo []func() error
	fail := func(err error) (*Imported, error) {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		return nil, errors.Join(append([]error{err}, errs...)...)
	}
	c := claims{b: b}
	var align, off uint64
	for i, s := range sizes {
		hd, err := get(b, i)
		if err != nil {
			return fail(err)
		}
		imp.handles = append(imp.handles, hd)
		undo = append(undo, func() error { return vmm.Call(b.Release(hd), "release %v", hd) })
		g, err := c.check(hd, s, off, name(i))
		if err != nil {
			return fail(err)
		}
		align = max(align, g)
		off += s
	}
	va, err := b.Reserve(total, align, 0, 0)
	if err != nil {
		return fail(vmm.Call(err, "reserve %s alignment %s", vmm.Size(total), vmm.Size(align)))
	}
	undo = append(undo, func() error { return vmm.Call(b.Free(va, total), "free %v+%s", va, vmm.Size(total)) })
	off = 0
	for i, s := range sizes {
		at := va + cu.DevicePtr(off)
		if err := b.Map(at, s, 0, imp.handles[i], 0); err != nil {
			return fail(vmm.Call(err, "map %s, claimed size %s, at %v (%v)", name(i), vmm.Size(s), at, imp.handles[i]))
		}
		undo = append(undo, func() error { return vmm.Call(b.Unmap(at, s), "unmap %v+%s", at, vmm.Size(s)) })
		off += s
	}
	if err := b.SetAccess(va, total, vmm.ReadWrite(access...)); err != nil {
		return fail(vmm.Call(err, "set access %v+%s devices %v", va, vmm.Size(total), access))
	}
	imp.base = va
	return imp, nil
}

// claims checks the sizes a peer claims for imported allocations against what the backend
// reports of them: the granularity of the location each lives on and, for device memory,
// the device's memory, which all the claims for that device together may not exceed.
type claims struct {
	b       vmm.Backend
	gran    map[cu.MemLocation]uint64
	total   map[int32]uint64 // claimed so far, by device
	devices map[int32]uint64 // memory of each device asked about
}

// check returns the granularity of the imported handle h, whose allocation is claimed to
// be size bytes and is to be mapped at offset off of the reservation.
func (c *claims) check(h cu.MemHandle, size, off uint64, name string) (uint64, error) {
	prop, err := c.b.Properties(h)
	if err != nil {
		return 0, vmm.Call(err, "properties of %s (%v)", name, h)
	}
	loc := prop.Location
	g, ok := c.gran[loc]
	if !ok {
		g, err = c.b.Granularity(&cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: loc}, cu.MEM_ALLOC_GRANULARITY_MINIMUM)
		if err != nil {
			return 0, vmm.Call(err, "granularity of %v, where %s lives", loc, name)
		}
		if g == 0 || g&(g-1) != 0 {
			return 0, fmt.Errorf("%w: granularity %d of %v, where %s lives, is not a power of two", ErrInvalid, g, loc, name)
		}
		if c.gran == nil {
			c.gran = map[cu.MemLocation]uint64{}
		}
		c.gran[loc] = g
	}
	if size%g != 0 {
		return 0, fmt.Errorf("%w: %s claims %s, not a multiple of the granularity %s of %v", ErrProtocol, name, vmm.Size(size), vmm.Size(g), loc)
	}
	if off%g != 0 {
		return 0, fmt.Errorf("%w: %s would be mapped at offset %s, not a multiple of the granularity %s of %v", ErrInvalid, name, vmm.Size(off), vmm.Size(g), loc)
	}
	if loc.Type != cu.MEM_LOCATION_TYPE_DEVICE {
		return g, nil
	}
	mem, ok := c.devices[loc.ID]
	if !ok {
		d, err := c.b.Device(int(loc.ID))
		if err != nil {
			return 0, vmm.Call(err, "device %d, where %s lives", loc.ID, name)
		}
		if c.devices == nil {
			c.devices, c.total = map[int32]uint64{}, map[int32]uint64{}
		}
		mem = d.TotalMem
		c.devices[loc.ID] = mem
	}
	sum := c.total[loc.ID] + size
	if sum < size || sum > mem {
		return 0, fmt.Errorf("%w: %s claims %s, which makes %s on %v, more than its %s of memory", ErrProtocol, name, vmm.Size(size), vmm.Size(sum), loc, vmm.Size(mem))
	}
	c.total[loc.ID] = sum
	return g, nil
}

// Base is the imported memory's device address in this process.
func (i *Imported) Base() cu.DevicePtr {
	if i == nil {
		return 0
	}
	return i.base
}

// Size is the total size of the imported allocations.
func (i *Imported) Size() uint64 {
	if i == nil {
		return 0
	}
	return i.size
}

// ReadAt reads len(p) bytes at offset off from the first access device's context.
func (i *Imported) ReadAt(p []byte, off int64) (int, error) {
	return i.copy("read", p, off, func(va cu.DevicePtr) error { return i.b.CopyDtoH(i.dev, p, va) })
}

// WriteAt writes p at offset off from the first access device's context.
func (i *Imported) WriteAt(p []byte, off int64) (int, error) {
	return i.copy("write", p, off, func(va cu.DevicePtr) error { return i.b.CopyHtoD(i.dev, va, p) })
}

func (i *Imported) copy(op string, p []byte, off int64, f func(cu.DevicePtr) error) (int, error) {
	args := fmt.Sprintf("%s at offset %d", vmm.Size(uint64(len(p))), off)
	if i == nil {
		return 0, &Error{Op: op, Args: args, Err: fmt.Errorf("%w: nil Imported", ErrInvalid)}
	}
	if !i.g.Enter(0) {
		return 0, &Error{Op: op, Args: args, Err: ErrClosed}
	}
	defer i.g.Exit()
	if off < 0 || uint64(off) > i.size || uint64(len(p)) > i.size-uint64(off) {
		return 0, &Error{Op: op, Args: args, Err: ErrOutOfRange}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := f(i.base + cu.DevicePtr(off)); err != nil {
		return 0, &Error{Op: op, Args: args, Err: vmm.Call(err, "copy from device %d", i.dev)}
	}
	return len(p), nil
}

// Close unmaps the memory, releases the imported handles and frees the reservation. It is
// idempotent; after a Close that failed, a later Close retries what failed. Closing a nil
// or zero Imported (one no Import made) does nothing.
func (i *Imported) Close() error {
	if i == nil || i.b == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.closed {
		i.closed = true
		i.g.Drain() // the copies in flight finish; new ones are refused
		b, va, size := i.b, i.base, i.size
		// One unmap over all the allocations: the driver unmaps adjacent mappings in one
		// call. Then the handles, then the range, which must be unmapped first.
		i.pending = append(i.pending, func() error { return vmm.Call(b.Unmap(va, size), "unmap %v+%s", va, vmm.Size(size)) })
		for _, h := range i.handles {
			i.pending = append(i.pending, func() error { return vmm.Call(b.Release(h), "release %v", h) })
		}
		i.pending = append(i.pending, func() error { return vmm.Call(b.Free(va, size), "free %v+%s", va, vmm.Size(size)) })
	}
	var errs []error
	var left []func() error
	for _, f := range i.pending {
		if err := f(); err != nil {
			errs = append(errs, err)
			left = append(left, f)
		}
	}
	i.pending = left
	if len(errs) > 0 {
		return &Error{Op: "close", Args: "imported memory", Err: errors.Join(errs...)}
	}
	return nil
}

// FabricHandle is a fabric handle and the size of the allocation it names: a value that
// crosses any transport. Its binary form is 80 bytes (magic, version, size, handle); its
// text form is "cuvmm-fabric-v1:SIZE:HANDLE" with the handle in unpadded URL-safe base64.
type FabricHandle struct {
	Handle cu.MemFabricHandle
	Size   uint64
}

const (
	fabricMagic   = "CVFH"
	fabricVersion = 1
	fabricLen     = 16 + 64 // magic 4, version 1, reserved 3, size 8, handle 64
	fabricPrefix  = "cuvmm-fabric-v1:"
)

// ExportFabric exports an allocation made with cu.MEM_HANDLE_TYPE_FABRIC.
func ExportFabric(a *vmm.Allocation) (FabricHandle, error) {
	if a == nil {
		return FabricHandle{}, &Error{Op: "export fabric", Err: fmt.Errorf("%w: nil Allocation", ErrInvalid)}
	}
	fh, err := a.ExportFabric()
	if err != nil {
		return FabricHandle{}, &Error{Op: "export fabric", Args: vmm.Size(a.Size()), Err: err}
	}
	return FabricHandle{Handle: fh, Size: a.Size()}, nil
}

// Import imports the allocation the handle names, as a *vmm.Allocation the caller closes.
// Its size is the peer's claim, checked as Import checks the sizes of a message.
func (f FabricHandle) Import(m *vmm.Manager) (*vmm.Allocation, error) {
	if m == nil || m.Backend() == nil {
		return nil, &Error{Op: "import fabric", Err: fmt.Errorf("%w: nil Manager", ErrInvalid)}
	}
	fail := func(err error) (*vmm.Allocation, error) {
		return nil, &Error{Op: "import fabric", Args: vmm.Size(f.Size), Err: err}
	}
	if f.Size == 0 {
		return fail(fmt.Errorf("%w: fabric handle claims size 0", ErrProtocol))
	}
	a, err := m.ImportFabric(f.Handle, f.Size)
	if err != nil {
		return fail(err)
	}
	c := claims{b: m.Backend()}
	if _, err := c.check(a.Handle(), f.Size, 0, "fabric handle"); err != nil {
		return fail(errors.Join(err, a.Close()))
	}
	return a, nil
}

// ImportFabric imports the allocations the handles name, maps them one after another in
// one reservation and grants the devices of access read-write access (nil: device 0).
func ImportFabric(m *vmm.Manager, handles []FabricHandle, access []int) (*Imported, error) {
	sizes := make([]uint64, len(handles))
	for i, fh := range handles {
		sizes[i] = fh.Size
	}
	imp, err := mapHandles(m, sizes, access,
		func(i int) string { return fmt.Sprintf("fabric handle %d", i) },
		func(b vmm.Backend, i int) (cu.MemHandle, error) {
			hd, err := b.ImportFabric(handles[i].Handle)
			return hd, vmm.Call(err, "import fabric handle %d", i)
		})
	if err != nil {
		return nil, &Error{Op: "import fabric", Args: fmt.Sprintf("%d handles", len(handles)), Err: err}
	}
	return imp, nil
}

// MarshalBinary encodes the handle in 80 bytes.
func (f FabricHandle) MarshalBinary() ([]byte, error) {
	b := make([]byte, fabricLen)
	copy(b, fabricMagic)
	b[4] = fabricVersion
	binary.LittleEndian.PutUint64(b[8:], f.Size)
	copy(b[16:], f.Handle[:])
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary encoded.
func (f *FabricHandle) UnmarshalBinary(b []byte) error {
	if len(b) != fabricLen {
		return fmt.Errorf("%w: fabric handle of %d bytes, want %d", ErrProtocol, len(b), fabricLen)
	}
	if string(b[:4]) != fabricMagic || b[4] != fabricVersion || b[5]|b[6]|b[7] != 0 {
		return fmt.Errorf("%w: not a version %d fabric handle", ErrProtocol, fabricVersion)
	}
	var d FabricHandle
	d.Size = binary.LittleEndian.Uint64(b[8:])
	copy(d.Handle[:], b[16:])
	*f = d
	return nil
}

// MarshalText encodes the handle as "cuvmm-fabric-v1:SIZE:HANDLE".
func (f FabricHandle) MarshalText() ([]byte, error) {
	return []byte(f.String()), nil
}

// UnmarshalText decodes what MarshalText encoded.
func (f *FabricHandle) UnmarshalText(t []byte) error {
	s, ok := strings.CutPrefix(string(t), fabricPrefix)
	if !ok {
		return fmt.Errorf("%w: fabric handle text does not start with %q", ErrProtocol, fabricPrefix)
	}
	sizeText, handleText, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("%w: fabric handle text has no handle", ErrProtocol)
	}
	size, err := strconv.ParseUint(sizeText, 10, 64)
	if err != nil || (len(sizeText) > 1 && sizeText[0] == '0') {
		return fmt.Errorf("%w: fabric handle size %q", ErrProtocol, sizeText)
	}
	// The decoder skips \r and \n; the length keeps them out, so that a handle has one
	// text form.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(handleText)
	if err != nil || len(raw) != len(f.Handle) || len(handleText) != base64.RawURLEncoding.EncodedLen(len(f.Handle)) {
		return fmt.Errorf("%w: fabric handle is not %d bytes of URL-safe base64", ErrProtocol, len(f.Handle))
	}
	var d FabricHandle
	d.Size = size
	copy(d.Handle[:], raw)
	*f = d
	return nil
}

// String is the text form.
func (f FabricHandle) String() string {
	return fabricPrefix + strconv.FormatUint(f.Size, 10) + ":" + base64.RawURLEncoding.EncodeToString(f.Handle[:])
}
