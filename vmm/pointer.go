package vmm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
)

// Pointer describes a device address as the driver sees it: what cuPointerGetAttributes
// reports of it (the embedded cu.PointerAttributes) and, where it maps memory of the VMM
// API, that allocation's properties. Code that receives an address from elsewhere uses it
// to decide how to share the memory (Share). Manager.Pointer makes one.
type Pointer struct {
	// Addr is the address described.
	Addr cu.DevicePtr
	// The driver's attributes of Addr, asked from AccessDevice's context.
	cu.PointerAttributes
	// AccessDevice is the device whose access to the memory Access is.
	AccessDevice int
	// VMM says Addr maps memory of the VMM API: cuMemRetainAllocationHandle found the
	// allocation mapped there (it finds none in memory of cuMemAlloc, a pool or managed
	// memory).
	VMM bool
	// Props are that allocation's properties (cuMemGetAllocationPropertiesFromHandle): its
	// location and the handle types it was created to be exported as. Zero when VMM is false,
	// or when the driver would not report them (a multicast object mapped there).
	Props cu.MemAllocationProp
}

// Pointer describes addr. It asks device 0's context, then, for device memory of another
// device, that device's, so that Access is the owning device's access. It costs one or two
// cuPointerGetAttributes calls and, for mapped memory, a retain, a properties query and a
// release of the allocation's handle.
func (m *Manager) Pointer(addr cu.DevicePtr) (Pointer, error) {
	if !m.usable() {
		return Pointer{}, opErr(errNoBackend, "pointer", "%v", addr)
	}
	return m.pointer(0, addr, true)
}

// PointerOn describes addr as device dev sees it: Access is dev's access.
func (m *Manager) PointerOn(dev int, addr cu.DevicePtr) (Pointer, error) {
	if !m.usable() {
		return Pointer{}, opErr(errNoBackend, "pointer", "%v from device %d", addr, dev)
	}
	return m.pointer(dev, addr, false)
}

// pointer is PointerOn; with toOwner (Pointer, from device 0) it asks again from the
// device that owns the memory, when that is another.
func (m *Manager) pointer(dev int, addr cu.DevicePtr, toOwner bool) (Pointer, error) {
	a, err := m.b.PointerAttributes(dev, addr)
	if err != nil {
		return Pointer{}, opErr(err, "pointer", "%v from device %d", addr, dev)
	}
	if toOwner && a.MemoryType == cu.MEMORYTYPE_DEVICE && a.DeviceOrdinal > 0 {
		return m.pointer(a.DeviceOrdinal, addr, false)
	}
	p := Pointer{Addr: addr, PointerAttributes: a, AccessDevice: dev}
	if !a.Mapped || a.Managed || a.Mempool != 0 {
		return p, nil
	}
	h, err := m.b.Retain(addr)
	if err != nil {
		return p, nil // not an allocation of the VMM API
	}
	p.VMM = true
	if props, err := m.b.Properties(h); err == nil {
		p.Props = props
	}
	if err := m.releaseRetained(h); err != nil {
		return p, opErr(err, "pointer", "%v: release of the retained %v (kept in the Manager's Pending list)", addr, h)
	}
	return p, nil
}

// AllowedHandleTypes are the shareable handle types the memory may be exported as: those the
// driver reports for the address and those the allocation was created with.
func (p Pointer) AllowedHandleTypes() cu.MemHandleType {
	return p.PointerAttributes.HandleTypes | p.Props.RequestedHandleTypes
}

// ShareMethod is how memory can be shared with another process.
type ShareMethod int

const (
	// ShareNone: the memory cannot be shared through the VMM API.
	ShareNone ShareMethod = iota
	// ShareFD: a POSIX file descriptor (Allocation.ExportFD), passed over a Unix socket
	// (vmm/ipc) to a process on the same node.
	ShareFD
	// ShareFabric: a fabric handle (Allocation.ExportFabric), 64 bytes sent any way, to a
	// process on this node or another of the NVLink domain; the importer needs an IMEX
	// channel.
	ShareFabric
)

var shareMethods = [...]string{ShareNone: "none", ShareFD: "posix-fd", ShareFabric: "fabric"}

func (s ShareMethod) String() string {
	if s >= 0 && int(s) < len(shareMethods) {
		return shareMethods[s]
	}
	return "ShareMethod(" + strconv.Itoa(int(s)) + ")"
}

// Share picks the best way to share the memory at p.Addr with another process, and says
// why: a fabric handle where the allocation allows one (it reaches processes on other nodes
// as well), else a POSIX file descriptor, else none, with what stands in the way.
func (p Pointer) Share() (ShareMethod, string) {
	switch {
	case p.MemoryType == 0 && !p.Mapped:
		return ShareNone, "the driver does not know the address: not CUDA memory, or freed"
	case !p.Mapped:
		return ShareNone, "nothing is mapped at the address (reserved address space without memory, or unmapped)"
	case p.Managed:
		return ShareNone, "managed memory has no shareable handle"
	case p.Mempool != 0:
		return ShareNone, "memory of a pool (cudaMallocAsync): the pool is what is shared (cuMemPoolExportToShareableHandle), which cuvmm does not do"
	case !p.VMM && p.LegacyIPC:
		return ShareNone, "memory of cuMemAlloc, not of the VMM API: only legacy CUDA IPC (cudaIpcGetMemHandle) shares it, which cuvmm does not do"
	case !p.VMM:
		return ShareNone, "not memory of the VMM API: cuMemRetainAllocationHandle finds no allocation at the address"
	}
	t := p.AllowedHandleTypes()
	fd := t&cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR != 0
	switch {
	case t&cu.MEM_HANDLE_TYPE_FABRIC != 0:
		why := "the allocation allows fabric handles: export one (Allocation.ExportFabric) for a process on this node or another of the NVLink domain, whose importer needs an IMEX channel"
		if fd {
			why += "; it allows POSIX file descriptors too, for a process on this node without IMEX"
		}
		return ShareFabric, why
	case fd:
		return ShareFD, "the allocation allows POSIX file descriptors: export one (Allocation.ExportFD) and pass it over a Unix socket (vmm/ipc) to a process on this node"
	case t&(cu.MEM_HANDLE_TYPE_WIN32|cu.MEM_HANDLE_TYPE_WIN32_KMT) != 0:
		return ShareNone, "the allocation allows only Win32 handles (Backend.ExportWin32), which vmm/ipc does not carry"
	case p.Props.Type == 0:
		return ShareNone, "the driver reports no shareable handle type at the address and no properties of what is mapped there (a multicast object?)"
	}
	return ShareNone, "the allocation was created without shareable handle types, so it cannot be exported: create it with Props.HandleTypes MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or MEM_HANDLE_TYPE_FABRIC"
}

// String describes the pointer on one line, for logs and messages.
func (p Pointer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %v", p.Addr, p.PointerAttributes)
	if p.Mapped {
		fmt.Fprintf(&b, " (device %d's access)", p.AccessDevice)
	}
	if p.VMM {
		fmt.Fprintf(&b, "; VMM allocation on %v", p.Props.Location)
	}
	s, why := p.Share()
	fmt.Fprintf(&b, "; share: %v (%s)", s, why)
	return b.String()
}
