// Package ipc shares device memory between processes: exported allocations travel as file
// descriptors over a Unix domain socket (SCM_RIGHTS, Linux) or, where no socket can join the
// two processes, are taken by the importer with pidfd_getfd (package pidfd, with a ticket);
// fabric handles travel as plain values over any transport.
//
// # Descriptors
//
// One kind of message carries descriptors over a socket (message.go): a header that says
// its kind, and for allocations (Header: their sizes, granularity and handle type) one
// descriptor per allocation, or for a dma-buf (DmaBufHeader) its one descriptor. Who owns
// which descriptor is explicit, and nothing leaks on any error path:
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
// Everything that comes from the other process is checked before it is used: Receive
// bounds the descriptors it takes and refuses a header at its first wrong byte and a
// descriptor that cannot be memory; Import checks each claimed size against the
// granularity and memory of the device the allocation lives on, as the driver reports
// them, and aligns the reservation to its own granularity, not the peer's; the driver
// maps whole allocations only, so a size that is not the allocation's is refused.
//
// # Fabric handles and dma-bufs
//
// FabricHandle is a fabric handle with the allocation's size, a value with binary and text
// forms (encoding.BinaryMarshaler, encoding.TextMarshaler) to send in JSON, gRPC or an
// environment variable to a process on another node of the same NVLink fabric. Creating
// fabric memory needs an IMEX channel.
//
// SendDmaBuf and ReceiveDmaBuf pass one dma-buf descriptor (a vmm.DmaBuf) to the process
// that drives an RDMA NIC, which registers it.
//
// # Errors
//
// Errors are *vmm.Error values (package "ipc") that match vmm's sentinels with errors.Is
// (vmm.ErrInvalid, vmm.ErrClosed, vmm.ErrOutOfRange) and the driver's results; a message,
// ticket or claim of the peer's that cannot be valid matches ErrProtocol.
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
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc/internal/fds"
)

var (
	// ErrUnsupported is returned by Send and Receive where SCM_RIGHTS is not available
	// (every platform but Linux), and by package pidfd's Fetch where pidfd_getfd is not
	// (every platform but Linux, and Linux before 5.6); the latter also matches
	// vmm.ErrUnsupported.
	ErrUnsupported = fds.ErrUnsupported
	// ErrProtocol is returned for a message that is not a valid header and descriptors,
	// and for a claim of the peer's that cannot be true.
	ErrProtocol = fds.ErrProtocol
)

// opError is the error of a failed operation of this package; nil when err is nil, so
// that an operation can return what it made with the error of its last step.
func opError(op, args string, err error) error {
	if err == nil {
		return nil
	}
	return &vmm.Error{Pkg: "ipc", Op: op, Args: args, Err: err}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{vmm.ErrInvalid}, args...)...)
}

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

// Exported is a set of allocations exported as POSIX file descriptors, ready to Send. It
// owns the descriptors until Close. The zero Exported holds none. It is safe for
// concurrent use; Send holds it while the descriptors go out (a blocking write to a full
// socket included: set a deadline on the connection), and Close waits for that.
type Exported struct {
	Header   Header
	mu       sync.Mutex
	fds      []int
	withdraw []func() error // what Publish made, withdrawn first by Close
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

// Close withdraws what Publish made and closes the descriptors. It is idempotent.
func (e *Exported) Close() error {
	if e == nil {
		return opError("close", "exported descriptors", invalid("a nil Exported"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for i := len(e.withdraw) - 1; i >= 0; i-- {
		errs = append(errs, e.withdraw[i]())
	}
	errs = append(errs, fds.Close(e.fds))
	e.fds, e.withdraw = nil, nil
	return opError("close", "exported descriptors", errors.Join(errs...))
}

// Publish lets another package make e's descriptors reachable from other processes (package
// pidfd does, with a ticket's manifest): publish runs with e's header and descriptors under
// e's lock, and Close runs the withdraw it returns first, before e's descriptors close, so
// that a process that finds the publication still there after taking the descriptors knows
// they were e's. Publish returns publish's error, vmm.ErrClosed once e is closed and an
// error matching vmm.ErrInvalid for a nil e, for the caller to say what failed.
func (e *Exported) Publish(publish func(h Header, fds []int) (withdraw func() error, err error)) error {
	if e == nil {
		return invalid("a nil Exported")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.fds) == 0 {
		return vmm.ErrClosed
	}
	w, err := publish(e.Header, e.fds)
	if err != nil {
		return err
	}
	e.withdraw = append(e.withdraw, w)
	return nil
}

// Export exports allocations made with cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in their
// props, in the order they will be mapped by the importer. The allocations stay the
// caller's. To export memory known by its address (a growable buffer's chunks, say),
// Manager.Retain each and close them once exported.
func Export(m *vmm.Manager, allocs ...*vmm.Allocation) (*Exported, error) {
	fail := func(err error) (*Exported, error) {
		return nil, opError("export", fmt.Sprintf("%d allocations", len(allocs)), err)
	}
	if len(allocs) == 0 || len(allocs) > MaxDescriptors {
		return fail(invalid("1 to %d allocations", MaxDescriptors))
	}
	sizes := make([]uint64, len(allocs))
	for i, a := range allocs {
		if sizes[i] = a.Size(); sizes[i] == 0 {
			return fail(invalid("allocation %d is nil, zero or of unknown size", i))
		}
	}
	prop, err := allocs[0].Properties()
	if err != nil {
		return fail(err)
	}
	g, err := m.Granularity(vmm.Props{Location: prop.Location}, false)
	if err != nil {
		return fail(err)
	}
	h := Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: g, Sizes: sizes}
	if err := h.validate(); err != nil {
		return fail(err)
	}
	e := &Exported{Header: h}
	for _, a := range allocs {
		fd, err := a.ExportFD()
		if err != nil {
			return fail(errors.Join(err, fds.Close(e.fds)))
		}
		e.fds = append(e.fds, fd)
	}
	return e, nil
}

// Received is a header and the descriptors that came with it. It owns the descriptors
// until Close. The zero Received holds none. It is safe for concurrent use; Import holds it
// for the whole import (every driver call that maps the memory), and Close and FDs wait for
// that.
type Received struct {
	Header Header
	mu     sync.Mutex
	fds    []int
}

// NewReceived wraps descriptors that another process's export came with (a transport of
// another package took them, as package pidfd's Fetch does); r owns them from then on.
func NewReceived(h Header, fds []int) *Received { return &Received{Header: h, fds: fds} }

// FDs returns the descriptors, still owned by r (nil after Close).
func (r *Received) FDs() []int {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.fds...)
}

// Close closes the descriptors. It is idempotent. It does not wait on another process's
// file system: a descriptor that is neither a memory file, a dma-buf nor one of the NVIDIA
// driver's devices (one of a FUSE file system, say, whose close waits for its server) is
// closed on a goroutine of its own.
func (r *Received) Close() error {
	if r == nil {
		return opError("close", "received descriptors", invalid("a nil Received"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := fds.CloseForeign(r.fds)
	r.fds = nil
	return opError("close", "received descriptors", err)
}

// Imported is memory of another process, mapped in this one: the allocations of a
// message one after another in one reservation, accessible from the devices it was
// imported for. It is safe for concurrent use: copies pin the memory without a lock and
// run alongside each other, and Close waits for those in flight.
//
// Only Import, ReceiveAndImport, FetchAndImport and ImportFabric make one: a nil or zero
// Imported fails every call with vmm.ErrInvalid.
type Imported struct {
	g *vmm.Region // its device is the one ReadAt and WriteAt copy from
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
		return nil, opError("import", "", invalid("a nil Received"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	args := fmt.Sprintf("%d descriptors, %s claimed", len(r.fds), claimedTotal(r.Header.Sizes))
	if len(r.fds) == 0 {
		return nil, opError("import", args, vmm.ErrClosed)
	}
	if len(r.fds) != len(r.Header.Sizes) {
		return nil, opError("import", args, fmt.Errorf("%w: %d descriptors for %d sizes", ErrProtocol, len(r.fds), len(r.Header.Sizes)))
	}
	imp, err := mapAll(m, r.Header.Sizes, access,
		func(i int) string { return fmt.Sprintf("allocation %d (fd %d)", i, r.fds[i]) },
		func(i int, size uint64) (*vmm.Allocation, error) { return m.ImportFD(r.fds[i], size) })
	return imp, opError("import", args, err)
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
	return units.Size(t)
}

// mapAll imports len(sizes) allocations with get, checks each claimed size against what
// the driver says of the imported memory, reserves their total aligned to the largest
// granularity, maps each whole at its offset and grants access, as one transaction.
// name(i) names allocation i in errors.
func mapAll(m *vmm.Manager, sizes []uint64, access []int, name func(int) string, get func(i int, size uint64) (*vmm.Allocation, error)) (*Imported, error) {
	if len(sizes) == 0 {
		return nil, invalid("nothing to import")
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
			return nil, fmt.Errorf("%w: sizes overflow at %s, which claims %s", ErrProtocol, name(i), units.Size(s))
		}
		total += s
	}
	tx := m.Begin(nil)
	var allocs []*vmm.Allocation
	c := claims{m: m}
	var align, off uint64
	for i, s := range sizes {
		a, err := get(i, s)
		if err != nil {
			return nil, tx.Rollback(opError("import", name(i), err))
		}
		tx.OnRollback("release", a.Close)
		allocs = append(allocs, a)
		g, err := c.check(a, off, name(i))
		if err != nil {
			return nil, tx.Rollback(err)
		}
		align = max(align, g)
		off += s
	}
	g, err := tx.NewRegion(total, access[0], vmm.WithAlignment(align))
	if err != nil {
		return nil, tx.Rollback(err)
	}
	off = 0
	for i, a := range allocs {
		if err := tx.Add(g, off, nil, a); err != nil {
			return nil, tx.Rollback(opError("map", fmt.Sprintf("%s, claimed size %s", name(i), units.Size(a.Size())), err))
		}
		off += a.Size()
	}
	if err := g.SetAccess(0, total, vmm.ReadWrite(access...)...); err != nil {
		return nil, tx.Rollback(err)
	}
	tx.Commit()
	return &Imported{g: g}, nil
}

// claims checks the sizes a peer claims for imported allocations against what the driver
// reports of them: the granularity of the location each lives on and, for device memory,
// the device's memory, which all the claims for that device together may not exceed.
type claims struct {
	m       *vmm.Manager
	gran    map[cu.MemLocation]uint64
	total   map[int32]uint64 // claimed so far, by device
	devices map[int32]uint64 // memory of each device asked about
}

// check returns the granularity of the imported allocation a, whose size is the peer's
// claim, to be mapped at offset off of the reservation.
func (c *claims) check(a *vmm.Allocation, off uint64, name string) (uint64, error) {
	size := a.Size()
	prop, err := a.Properties()
	if err != nil {
		return 0, opError("properties", name, err)
	}
	loc := prop.Location
	g, ok := c.gran[loc]
	if !ok {
		g, err = c.m.Granularity(vmm.Props{Location: loc}, false)
		if err != nil {
			return 0, opError("granularity", fmt.Sprintf("of %v, where %s lives", loc, name), err)
		}
		if g == 0 || g&(g-1) != 0 {
			return 0, invalid("granularity %d of %v, where %s lives, is not a power of two", g, loc, name)
		}
		if c.gran == nil {
			c.gran = map[cu.MemLocation]uint64{}
		}
		c.gran[loc] = g
	}
	if size%g != 0 {
		return 0, fmt.Errorf("%w: %s claims %s, not a multiple of the granularity %s of %v", ErrProtocol, name, units.Size(size), units.Size(g), loc)
	}
	if off%g != 0 {
		return 0, invalid("%s would be mapped at offset %s, not a multiple of the granularity %s of %v", name, units.Size(off), units.Size(g), loc)
	}
	if loc.Type != cu.MEM_LOCATION_TYPE_DEVICE {
		return g, nil
	}
	mem, ok := c.devices[loc.ID]
	if !ok {
		d, err := c.m.Device(int(loc.ID))
		if err != nil {
			return 0, opError("device", fmt.Sprintf("%d, where %s lives", loc.ID, name), err)
		}
		if c.devices == nil {
			c.devices, c.total = map[int32]uint64{}, map[int32]uint64{}
		}
		mem = d.TotalMem
		c.devices[loc.ID] = mem
	}
	sum := c.total[loc.ID] + size
	if sum < size || sum > mem {
		return 0, fmt.Errorf("%w: %s claims %s, which makes %s on %v, more than its %s of memory", ErrProtocol, name, units.Size(size), units.Size(sum), loc, units.Size(mem))
	}
	c.total[loc.ID] = sum
	return g, nil
}

func (i *Imported) usable() bool { return i != nil && i.g != nil }

// Base is the imported memory's device address in this process.
func (i *Imported) Base() cu.DevicePtr {
	if !i.usable() {
		return 0
	}
	return i.g.Base()
}

// Size is the total size of the imported allocations.
func (i *Imported) Size() uint64 {
	if !i.usable() {
		return 0
	}
	return i.g.Size()
}

// ReadAt reads len(p) bytes at offset off from the first access device's context.
func (i *Imported) ReadAt(p []byte, off int64) (int, error) { return i.view().ReadAt(p, off) }

// WriteAt writes p at offset off from the first access device's context.
func (i *Imported) WriteAt(p []byte, off int64) (int, error) { return i.view().WriteAt(p, off) }

func (i *Imported) view() vmm.View {
	if !i.usable() {
		return vmm.View{}
	}
	return i.g.From(i.g.Device())
}

// From returns the memory as device dev reaches it.
func (i *Imported) From(dev int) vmm.View {
	if !i.usable() {
		return vmm.View{}
	}
	return i.g.From(dev)
}

// Close unmaps the memory and frees the reservation once the copies in flight have
// finished, and releases the imported allocations. It is idempotent; after a Close that
// failed, a later Close retries what failed.
func (i *Imported) Close() error {
	if !i.usable() {
		return opError("close", "imported memory", invalid("a nil or zero Imported (make one with Import)"))
	}
	err := i.g.Close()
	return opError("close", "imported memory", err)
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
	fh, err := a.ExportFabric()
	if err != nil {
		return FabricHandle{}, opError("export fabric", units.Size(a.Size()), err)
	}
	return FabricHandle{Handle: fh, Size: a.Size()}, nil
}

// Import imports the allocation the handle names, as a *vmm.Allocation the caller closes.
// Its size is the peer's claim, checked as Import checks the sizes of a message.
func (f FabricHandle) Import(m *vmm.Manager) (*vmm.Allocation, error) {
	fail := func(err error) (*vmm.Allocation, error) {
		return nil, opError("import fabric", units.Size(f.Size), err)
	}
	if f.Size == 0 {
		return fail(fmt.Errorf("%w: fabric handle claims size 0", ErrProtocol))
	}
	tx := m.Begin(nil)
	a, err := m.ImportFabric(f.Handle, f.Size)
	if err != nil {
		return fail(err)
	}
	tx.OnRollback("release", a.Close)
	c := claims{m: m}
	if _, err := c.check(a, 0, "fabric handle"); err != nil {
		return fail(tx.Rollback(err))
	}
	tx.Commit()
	return a, nil
}

// ImportFabric imports the allocations the handles name, maps them one after another in
// one reservation and grants the devices of access read-write access (nil: device 0).
func ImportFabric(m *vmm.Manager, handles []FabricHandle, access []int) (*Imported, error) {
	sizes := make([]uint64, len(handles))
	for i, fh := range handles {
		sizes[i] = fh.Size
	}
	imp, err := mapAll(m, sizes, access,
		func(i int) string { return fmt.Sprintf("fabric handle %d", i) },
		func(i int, size uint64) (*vmm.Allocation, error) { return m.ImportFabric(handles[i].Handle, size) })
	return imp, opError("import fabric", fmt.Sprintf("%d handles", len(handles)), err)
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
	fail := func(format string, args ...any) error {
		err := fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
		return opError("decode fabric handle", fmt.Sprintf("of %d bytes", len(b)), err)
	}
	if len(b) != fabricLen {
		return fail("fabric handle of %d bytes, want %d", len(b), fabricLen)
	}
	if string(b[:4]) != fabricMagic || b[4] != fabricVersion || b[5]|b[6]|b[7] != 0 {
		return fail("not a version %d fabric handle", fabricVersion)
	}
	f.Size = binary.LittleEndian.Uint64(b[8:])
	copy(f.Handle[:], b[16:])
	return nil
}

// MarshalText encodes the handle as "cuvmm-fabric-v1:SIZE:HANDLE".
func (f FabricHandle) MarshalText() ([]byte, error) {
	return []byte(f.String()), nil
}

// UnmarshalText decodes what MarshalText encoded.
func (f *FabricHandle) UnmarshalText(t []byte) error {
	fail := func(format string, args ...any) error {
		err := fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
		return opError("decode fabric handle", fmt.Sprintf("text of %d bytes", len(t)), err)
	}
	s, ok := strings.CutPrefix(string(t), fabricPrefix)
	if !ok {
		return fail("fabric handle text does not start with %q", fabricPrefix)
	}
	sizeText, handleText, ok := strings.Cut(s, ":")
	if !ok {
		return fail("fabric handle text has no handle")
	}
	size, err := strconv.ParseUint(sizeText, 10, 64)
	if err != nil || (len(sizeText) > 1 && sizeText[0] == '0') {
		return fail("fabric handle size %q", sizeText)
	}
	// The decoder skips \r and \n; the length keeps them out, so that a handle has one
	// text form.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(handleText)
	if err != nil || len(raw) != len(f.Handle) || len(handleText) != base64.RawURLEncoding.EncodedLen(len(f.Handle)) {
		return fail("fabric handle is not %d bytes of URL-safe base64", len(f.Handle))
	}
	f.Size = size
	copy(f.Handle[:], raw)
	return nil
}

// String is the text form.
func (f FabricHandle) String() string {
	return fabricPrefix + strconv.FormatUint(f.Size, 10) + ":" + base64.RawURLEncoding.EncodeToString(f.Handle[:])
}
