package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
)

// Sharing. An allocation created with MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or
// MEM_HANDLE_TYPE_FABRIC lives in a file (a memfd on Linux, a temporary file elsewhere)
// whose bytes are the allocation's: exporting hands out a duplicate descriptor of it, and
// any process running sim that imports the descriptor reads and writes the same bytes.
// The file's name carries the owning device ("cuvmm-sim.d<ordinal>"), the one piece of
// metadata an importer needs besides the size.

const shareName = "cuvmm-sim.d"

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// shareable gives m a file store and, for fabric allocations, a token.
func (s *Sim) shareable(m *phys) *failure {
	m.id = s.nextID.Add(1)
	fabric := m.prop.RequestedHandleTypes&cu.MEM_HANDLE_TYPE_FABRIC != 0
	path := ""
	if fabric {
		path = fabricPath(os.Getpid(), s.id, m.id)
	}
	f, remove, err := newShareFile(fmt.Sprintf("%s%d", shareName, m.dev), m.size, path)
	if err != nil {
		return fail(cu.ERROR_OUT_OF_MEMORY, "cannot create the shareable backing file: "+err.Error())
	}
	m.st = &fileStore{f: f, remove: remove}
	m.fileKey = keyOf(f)
	var tok cu.MemFabricHandle
	if fabric {
		tok = s.fabricToken(m, f)
		m.fabric = &tok
	}
	s.shareMu.Lock()
	if m.fileKey != (fileKey{}) {
		s.byFile[m.fileKey] = m
	}
	if fabric {
		s.byFabric[tok] = m
	}
	s.shareMu.Unlock()
	return nil
}

// fabricMagic starts every fabric token sim makes.
var fabricMagic = [16]byte{'c', 'u', 'v', 'm', 'm', '-', 's', 'i', 'm', '-', 'f', 'a', 'b', 'r', 'i', 'c'}

// fabricToken encodes where another process finds the allocation's file: the exporting
// process and its descriptor (Linux, through /proc/<pid>/fd/<fd>) or, elsewhere, the named
// file's identity under os.TempDir. Layout: magic[16] pid u32 fd u32 dev u32 0 u32 size u64
// ino u64 sim u64 alloc u64.
func (s *Sim) fabricToken(m *phys, f *os.File) cu.MemFabricHandle {
	var t cu.MemFabricHandle
	copy(t[:16], fabricMagic[:])
	le := binary.LittleEndian
	le.PutUint32(t[16:], uint32(os.Getpid()))
	le.PutUint32(t[20:], uint32(f.Fd()))
	le.PutUint32(t[24:], uint32(int32(m.dev)))
	le.PutUint64(t[32:], m.size)
	le.PutUint64(t[40:], m.fileKey.ino)
	le.PutUint64(t[48:], s.id)
	le.PutUint64(t[56:], m.id)
	return t
}

type fabricRef struct {
	pid, fd int
	dev     int
	size    uint64
	ino     uint64
	sim, id uint64
}

func parseFabric(t cu.MemFabricHandle) (fabricRef, bool) {
	if [16]byte(t[:16]) != fabricMagic {
		return fabricRef{}, false
	}
	le := binary.LittleEndian
	return fabricRef{
		pid: int(le.Uint32(t[16:])), fd: int(le.Uint32(t[20:])), dev: int(int32(le.Uint32(t[24:]))),
		size: le.Uint64(t[32:]), ino: le.Uint64(t[40:]), sim: le.Uint64(t[48:]), id: le.Uint64(t[56:]),
	}, true
}

// importHandle returns a new handle for memory this Sim already knows, taking over one user
// of m that the caller holds: an imported handle reports no shareable handle types
// (recorded).
func (s *Sim) importHandle(m *phys) cu.MemHandle {
	p := m.prop
	p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_NONE
	return s.newHandle(m, nil, p).value
}

// known returns the memory this Sim holds in the file with key k, with one more user for
// the caller, or nil.
func (s *Sim) known(k fileKey) *phys {
	if k == (fileKey{}) {
		return nil
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	return tryUse(s.byFile[k])
}

// tryUse takes one more user of m unless m is nil or already freed.
func tryUse(m *phys) *phys {
	for m != nil {
		u := atomic.LoadInt32(&m.users)
		if u == 0 {
			return nil
		}
		if atomic.CompareAndSwapInt32(&m.users, u, u+1) {
			return m
		}
	}
	return nil
}

// adopt makes a phys for a file another process (or another Sim) exported. Its bytes belong
// to the exporter's device, so they count against no capacity here.
func (s *Sim) adopt(f *os.File, size uint64, dev int) cu.MemHandle {
	if dev < 0 || dev >= len(s.cfg.Devices) {
		dev = 0
	}
	m := &phys{
		id: s.nextID.Add(1), size: size, dev: dev, st: &fileStore{f: f}, users: 1,
		prop: cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED,
			Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: int32(dev)}},
		fileKey: keyOf(f),
	}
	if m.fileKey != (fileKey{}) {
		s.shareMu.Lock()
		s.byFile[m.fileKey] = m
		s.shareMu.Unlock()
	}
	return s.importHandle(m)
}

// exportable returns h's memory, with one more user for the caller, if it was created with
// handle type t.
func (s *Sim) exportable(v cu.MemHandle, t cu.MemHandleType) (*phys, *failure) {
	sh := s.shardOf(v)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h := sh.lookup(v)
	switch {
	case h == nil:
		return nil, fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
	case h.mc != nil:
		return nil, fail(cu.ERROR_NOT_SUPPORTED, "sim does not export multicast objects")
	case h.prop.RequestedHandleTypes&t == 0:
		return nil, fail(cu.ERROR_INVALID_VALUE, "allocation not created with this handle type") // recorded
	}
	h.mem.use()
	return h.mem, nil
}

// ExportFD is cuMemExportToShareableHandle for POSIX descriptors: a new descriptor of the
// allocation's file, which the caller owns.
func (s *Sim) ExportFD(v cu.MemHandle) (int, error) {
	f := s.enter(opExportFD)
	var m *phys
	if f == nil {
		m, f = s.exportable(v, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	}
	fd := -1
	if f == nil {
		var err error
		if fd, err = dupFD(m.st.(*fileStore).f); err != nil {
			f = fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
		}
		s.unuse(m)
	}
	if f != nil {
		return -1, f.wrap("cuMemExportToShareableHandle", "%v, POSIX_FILE_DESCRIPTOR", v)
	}
	return fd, nil
}

// ImportFD is cuMemImportFromShareableHandle for POSIX descriptors; the descriptor stays
// the caller's. Recorded: a closed descriptor, or one that is not an exported allocation,
// is CUDA_ERROR_UNKNOWN, and importing in the exporting process gives a new handle value.
func (s *Sim) ImportFD(fd int) (cu.MemHandle, error) {
	f := s.enter(opImportFD)
	if f == nil {
		f = s.vmm()
	}
	if f == nil && fd < 0 {
		f = argFail("negative file descriptor")
	}
	var h cu.MemHandle
	if f == nil {
		file, err := fileFromFD(fd)
		if err != nil {
			f = fail(resBadFD, "bad descriptor: "+err.Error())
		} else if m := s.known(keyOf(file)); m != nil {
			file.Close()
			h = s.importHandle(m)
		} else if size, dev, ok := describeFile(file); !ok {
			file.Close()
			f = fail(resBadFD, "descriptor is not an exported allocation")
		} else {
			h = s.adopt(file, size, dev)
		}
	}
	if f != nil {
		return 0, f.wrap("cuMemImportFromShareableHandle", "fd %d", fd)
	}
	return h, nil
}

// knownFabric returns the memory of a fabric token this Sim made, with one more user for
// the caller, or nil.
func (s *Sim) knownFabric(t cu.MemFabricHandle) *phys {
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	return tryUse(s.byFabric[t])
}

// ExportFabric is cuMemExportToShareableHandle for fabric handles.
func (s *Sim) ExportFabric(v cu.MemHandle) (cu.MemFabricHandle, error) {
	f := s.enter(opExportFabric)
	var m *phys
	if f == nil {
		m, f = s.exportable(v, cu.MEM_HANDLE_TYPE_FABRIC)
	}
	if f != nil {
		return cu.MemFabricHandle{}, f.wrap("cuMemExportToShareableHandle", "%v, FABRIC", v)
	}
	t := *m.fabric
	s.unuse(m)
	return t, nil
}

// ImportFabric is cuMemImportFromShareableHandle for fabric handles: any process on this
// machine whose Sim has an IMEX channel can import a token while its exporter holds the
// allocation.
func (s *Sim) ImportFabric(t cu.MemFabricHandle) (cu.MemHandle, error) {
	f := s.enter(opImportFabric)
	if f == nil {
		f = s.vmm()
	}
	if f == nil && !s.cfg.IMEX {
		f = fail(resFabricImportNoIMEX, "no IMEX channel") // recorded
	}
	var h cu.MemHandle
	if f == nil {
		ref, ok := parseFabric(t)
		mine := s.knownFabric(t)
		switch {
		case !ok:
			f = fail(resBadFabric, "not a fabric handle")
		case mine != nil:
			h = s.importHandle(mine)
		default:
			file, err := openFabric(ref)
			if err != nil {
				f = fail(resBadFabric, "allocation not found: "+err.Error())
			} else if m := s.known(keyOf(file)); m != nil {
				file.Close()
				h = s.importHandle(m)
			} else {
				h = s.adopt(file, ref.size, ref.dev)
			}
		}
	}
	if f != nil {
		return 0, f.wrap("cuMemImportFromShareableHandle", "FABRIC")
	}
	return h, nil
}

// ExportWin32 is cuMemExportToShareableHandle for Windows handles. sim models them within
// one Sim only: the value is a token that ImportWin32 of the same Sim accepts.
func (s *Sim) ExportWin32(v cu.MemHandle, t cu.MemHandleType) (uintptr, error) {
	f := s.enter(opExportWin32)
	if f == nil && t != cu.MEM_HANDLE_TYPE_WIN32 && t != cu.MEM_HANDLE_TYPE_WIN32_KMT {
		f = argFail("not a Win32 handle type")
	}
	var m *phys
	if f == nil {
		m, f = s.exportable(v, t)
	}
	if f != nil {
		return 0, f.wrap("cuMemExportToShareableHandle", "%v, %d", v, t)
	}
	s.shareMu.Lock()
	s.nextWin32 += 4
	w := s.nextWin32
	s.win32[w] = m
	s.shareMu.Unlock()
	s.unuse(m)
	return w, nil
}

// ImportWin32 is cuMemImportFromShareableHandle for Windows handles (see ExportWin32).
func (s *Sim) ImportWin32(handle uintptr, t cu.MemHandleType) (cu.MemHandle, error) {
	f := s.enter(opImportWin32)
	if f == nil && t != cu.MEM_HANDLE_TYPE_WIN32 && t != cu.MEM_HANDLE_TYPE_WIN32_KMT {
		f = argFail("not a Win32 handle type")
	}
	if f == nil {
		f = s.vmm()
	}
	var m *phys
	if f == nil {
		s.shareMu.Lock()
		if m = tryUse(s.win32[handle]); m == nil {
			delete(s.win32, handle)
			f = fail(cu.ERROR_INVALID_VALUE, "not an exported handle of this process")
		}
		s.shareMu.Unlock()
	}
	if f != nil {
		return 0, f.wrap("cuMemImportFromShareableHandle", "%#x, %d", handle, t)
	}
	return s.importHandle(m), nil
}
