package sim

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
)

// Sharing. An allocation created with MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or
// MEM_HANDLE_TYPE_FABRIC lives in a file whose bytes are the allocation's, and any process
// running sim that imports an export of it reads and writes the same bytes. On Linux an
// allocation shareable as a POSIX descriptor only lives in the process's arena of exports,
// one memfd for all, as the driver opens every export on /dev/nvidiactl (share_linux.go);
// one shareable as a fabric handle has a memfd of its own, as every shareable allocation has
// a temporary file elsewhere, and its exports are duplicates of that file's descriptor.
//
// What arrives from another process is not trusted. A descriptor is taken only if it is a
// file this process exported, or, on Linux, an arena's open at a header that describes an
// allocation, or a memfd named as sim names a fabric allocation's
// ("cuvmm-sim.f<device>.<digest>"), whose device exists here and whose size is a whole
// number of that device's granules, no larger than its memory. A fabric
// token carries a 256-bit secret that only the exporter and the holders of the token know,
// and the file it leads to must bear the secret's SHA-256 and the token's device in its
// name before anything is opened for reading or writing: a forged token reaches nothing,
// and the name, which any process that may look at the exporter's descriptors reads,
// does not make one.

const (
	shareName  = "cuvmm-sim.d" // + device: memory shared as a descriptor
	fabricName = "cuvmm-sim.f" // + device + "." + digest: memory shared as a fabric handle
)

// fabricMagic starts every fabric token sim makes.
var fabricMagic = [16]byte{'c', 'u', 'v', 'm', 'm', '-', 's', 'i', 'm', '-', 'f', 'a', 'b', 'r', 'i', 'c'}

// fabricToken is a parsed fabric handle. Layout: magic[16] secret[32] pid u32 fd u32
// device u32, then 4 bytes that are ignored, as the driver ignores at least a handle's last
// byte (recorded: vmmtest fabric/import-one-byte-changed). pid and fd say where the exporter holds the file (Linux reaches it
// through /proc/<pid>/fd/<fd>); the secret proves the holder was given the token.
type fabricToken struct {
	secret  [32]byte
	pid, fd uint32
	dev     uint32
}

func (t fabricToken) handle() cu.MemFabricHandle {
	var h cu.MemFabricHandle
	copy(h[:16], fabricMagic[:])
	copy(h[16:48], t.secret[:])
	le := binary.LittleEndian
	le.PutUint32(h[48:], t.pid)
	le.PutUint32(h[52:], t.fd)
	le.PutUint32(h[56:], t.dev)
	return h
}

func parseFabric(h cu.MemFabricHandle) (fabricToken, bool) {
	le := binary.LittleEndian
	if [16]byte(h[:16]) != fabricMagic {
		return fabricToken{}, false
	}
	return fabricToken{secret: [32]byte(h[16:48]), pid: le.Uint32(h[48:]), fd: le.Uint32(h[52:]), dev: le.Uint32(h[56:])}, true
}

// fileName is the name of the file of an allocation of device dev: with the digest of its
// secret for a fabric allocation.
func fileName(dev int, secret *[32]byte) string {
	if secret == nil {
		return shareName + strconv.Itoa(dev)
	}
	return fabricName + strconv.Itoa(dev) + "." + digest(secret)
}

// digest is what a fabric allocation's file name says of its secret.
func digest(secret *[32]byte) string {
	sum := sha256.Sum256(secret[:])
	return hex.EncodeToString(sum[:])
}

// parseFileName reads the device (and, for a fabric allocation, its secret's digest) from
// a file's name; ok is false for any name sim does not make.
func parseFileName(name string) (dev int, digest string, ok bool) {
	rest, fabric := strings.CutPrefix(name, fabricName)
	if fabric {
		rest, digest, _ = strings.Cut(rest, ".")
	} else if rest, ok = strings.CutPrefix(name, shareName); !ok {
		return 0, "", false
	}
	// One spelling of each device: Atoi also takes signs and leading zeros.
	dev, err := strconv.Atoi(rest)
	if err != nil || dev < 0 || dev > 9999 || strconv.Itoa(dev) != rest || fabric && len(digest) != 64 {
		return 0, "", false
	}
	return dev, digest, true
}

// exports is what every Sim of this process exported, by file: an import into another Sim
// of this process finds the file here without trusting a name.
var exports = struct {
	sync.Mutex
	byFile   map[fileKey]exported
	byFabric map[fabricToken]exported
}{byFile: map[fileKey]exported{}, byFabric: map[fabricToken]exported{}}

type exported struct {
	f    *os.File // a fabric allocation's file, duplicated for each import of its token
	size uint64
	dev  int
}

func publish(k fileKey, tok *fabricToken, e exported) {
	exports.Lock()
	defer exports.Unlock()
	if k != (fileKey{}) {
		exports.byFile[k] = e
	}
	if tok != nil {
		exports.byFabric[*tok] = e
	}
}

func unpublish(k fileKey, tok *fabricToken) {
	exports.Lock()
	defer exports.Unlock()
	delete(exports.byFile, k)
	if tok != nil {
		delete(exports.byFabric, *tok)
	}
}

// shareable gives m a file store and, for fabric allocations, a token.
func (s *Sim) shareable(m *phys) *failure {
	s.nextID++
	m.id = s.nextID
	var secret *[32]byte
	if m.prop.RequestedHandleTypes&cu.MEM_HANDLE_TYPE_FABRIC != 0 {
		secret = new([32]byte)
		if _, err := rand.Read(secret[:]); err != nil {
			return fail(cu.ERROR_OPERATING_SYSTEM, "no randomness for a fabric secret: "+err.Error())
		}
	}
	var f *os.File
	var err error
	if secret == nil {
		m.st, m.fileKey, err = newExportable(m.dev, m.size)
	} else {
		var remove string
		if f, remove, err = newShareFile(fileName(m.dev, secret), m.size, true); err == nil {
			m.st, m.fileKey = &fileStore{f: f, remove: remove}, keyOf(f)
			m.token = &fabricToken{secret: *secret, pid: uint32(os.Getpid()), fd: uint32(f.Fd()), dev: uint32(m.dev)}
			t := m.token.handle()
			m.fabric = &t
		}
	}
	if err != nil {
		return fail(cu.ERROR_OUT_OF_MEMORY, "cannot create the shareable backing file: "+err.Error())
	}
	if m.fileKey != (fileKey{}) {
		s.byFile[m.fileKey] = m
	}
	if m.fabric != nil {
		s.byFabric[*m.fabric] = m
	}
	publish(m.fileKey, m.token, exported{f: f, size: m.size, dev: m.dev})
	return nil
}

// fileFromFD duplicates a caller's descriptor, which stays the caller's.
func fileFromFD(fd int) (*os.File, error) { return dupAs(uintptr(fd), "imported") }

// dupFile returns a new *os.File of the file f is open on.
func dupFile(f *os.File) (*os.File, error) { return dupAs(f.Fd(), f.Name()) }

// dupAs returns a new *os.File, named name, of the file fd is open on.
func dupAs(fd uintptr, name string) (*os.File, error) {
	nfd, err := dupFD(fd)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// importable checks what an importer learnt about a file from outside this Sim: its device
// must exist here, and its size must be a whole number of that device's granules, no more
// than its memory (the driver refuses descriptors that are not allocations, recorded: vmmtest
// share/import-non-cuda-fd, walk/import-fd-temporary-file).
func (s *Sim) importable(size uint64, dev int) *failure {
	if dev < 0 || dev >= len(s.cfg.Devices) {
		return fail(resBadFD, fmt.Sprintf("the allocation's device %d does not exist here", dev))
	}
	d := &s.cfg.Devices[dev]
	if size == 0 || size%d.Granularity != 0 || size > d.TotalMem {
		return fail(resBadFD, fmt.Sprintf("size %d is not an allocation of device %d", size, dev))
	}
	return nil
}

// importHandle returns a new handle for memory this Sim already knows, taking over one user
// of m that the caller holds: an imported handle reports no shareable handle types
// (recorded: vmmtest walk/properties-imported).
func (s *Sim) importHandle(m *phys) cu.MemHandle {
	p := m.prop
	p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_NONE
	return s.newHandle(m, nil, p).value
}

// adopt makes a phys for an allocation another process (or another Sim) exported, whose
// bytes are st and which key finds, of size bytes of device dev (both checked by
// importable). Its bytes belong to the exporter's device, so they count against no
// capacity here.
func (s *Sim) adopt(st store, key fileKey, size uint64, dev int) cu.MemHandle {
	s.nextID++
	m := s.sparePhys.get()
	*m = phys{
		id: s.nextID, size: size, dev: dev, st: st, users: 1,
		prop: cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED,
			Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: int32(dev)}},
		fileKey: key,
	}
	if m.fileKey != (fileKey{}) {
		s.byFile[m.fileKey] = m
	}
	return s.importHandle(m)
}

// exportable returns h's memory if it was created with handle type t.
func (s *Sim) exportable(v cu.MemHandle, t cu.MemHandleType) (*phys, *failure) {
	h := s.lookup(v)
	switch {
	case h == nil:
		return nil, fail(cu.ERROR_INVALID_VALUE, "unknown or released handle")
	case h.mc != nil:
		return nil, fail(cu.ERROR_NOT_SUPPORTED, "sim does not export multicast objects")
	case h.prop.RequestedHandleTypes&t == 0:
		return nil, fail(cu.ERROR_INVALID_VALUE, "allocation not created with this handle type") // recorded: vmmtest share/export-fd-not-requested, walk/export-fabric-posix-fd-only
	}
	return h.mem, nil
}

// ExportFD is cuMemExportToShareableHandle for POSIX descriptors: a new descriptor of the
// allocation (on Linux a new open file description of the arena, see share_linux.go),
// which the caller owns.
func (s *Sim) ExportFD(v cu.MemHandle) (int, error) {
	fd, f := locked(s, OpExportFD, func() (int, *failure) {
		m, f := s.exportable(v, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		if f != nil {
			return -1, f
		}
		fd, err := exportFD(m.st)
		if err != nil {
			return -1, fail(cu.ERROR_OPERATING_SYSTEM, err.Error())
		}
		return fd, nil
	})
	if f != nil {
		return -1, f.wrap("cuMemExportToShareableHandle", "%v, POSIX_FILE_DESCRIPTOR", v)
	}
	return fd, nil
}

// ImportFD is cuMemImportFromShareableHandle for POSIX descriptors; the descriptor stays
// the caller's.
func (s *Sim) ImportFD(fd int) (cu.MemHandle, error) {
	h, f := locked(s, OpImportFD, func() (cu.MemHandle, *failure) { return s.importFD(fd) })
	if f != nil {
		return 0, f.wrap("cuMemImportFromShareableHandle", "fd %d", fd)
	}
	return h, nil
}

// importFD imports as recorded: a closed descriptor, or one that is not an exported
// allocation, is CUDA_ERROR_UNKNOWN, and importing in the exporting process gives a new
// handle value.
func (s *Sim) importFD(fd int) (cu.MemHandle, *failure) {
	if fd < 0 {
		return 0, argFail("negative file descriptor")
	}
	if notMemfd(fd) {
		return 0, fail(resBadFD, "descriptor is not an exported allocation") // recorded: vmmtest share/import-non-cuda-fd
	}
	file, err := fileFromFD(fd)
	if err != nil {
		return 0, fail(resBadFD, "bad descriptor: "+err.Error()) // recorded: vmmtest share/import-closed-fd
	}
	// Neither map holds the zero key of a file keyOf cannot tell.
	k := keyOf(file)
	if m := tryUse(s.byFile[k]); m != nil {
		file.Close()
		return s.importHandle(m), nil
	}
	exports.Lock()
	e, ours := exports.byFile[k]
	exports.Unlock()
	st, size, dev, ok := describeFile(file)
	if ours {
		// Another Sim of this process made it: no header or name need be trusted.
		if !ok {
			st = &fileStore{f: file}
		}
		size, dev, ok = e.size, e.dev, true
	}
	if !ok {
		file.Close()
		return 0, fail(resBadFD, "descriptor is not an exported allocation") // recorded: vmmtest share/import-non-cuda-fd
	}
	if f := s.importable(size, dev); f != nil {
		st.close()
		return 0, f
	}
	return s.adopt(st, k, size, dev), nil
}

// ExportFabric is cuMemExportToShareableHandle for fabric handles.
func (s *Sim) ExportFabric(v cu.MemHandle) (cu.MemFabricHandle, error) {
	t, f := locked(s, OpExportFabric, func() (cu.MemFabricHandle, *failure) {
		m, f := s.exportable(v, cu.MEM_HANDLE_TYPE_FABRIC)
		if f != nil {
			return cu.MemFabricHandle{}, f
		}
		return *m.fabric, nil
	})
	if f != nil {
		return cu.MemFabricHandle{}, f.wrap("cuMemExportToShareableHandle", "%v, FABRIC", v)
	}
	return t, nil
}

// ImportFabric is cuMemImportFromShareableHandle for fabric handles: any process on this
// machine whose Sim has an IMEX channel can import a token while its exporter holds the
// allocation.
func (s *Sim) ImportFabric(t cu.MemFabricHandle) (cu.MemHandle, error) {
	h, f := locked(s, OpImportFabric, func() (cu.MemHandle, *failure) { return s.importFabric(t) })
	if f != nil {
		return 0, f.wrap("cuMemImportFromShareableHandle", "FABRIC")
	}
	return h, nil
}

func (s *Sim) importFabric(t cu.MemFabricHandle) (cu.MemHandle, *failure) {
	if !s.cfg.IMEX {
		return 0, fail(resFabricImportNoIMEX, "no IMEX channel") // recorded: vmmtest walk/import-fabric-zero
	}
	tok, ok := parseFabric(t)
	if !ok {
		return 0, fail(resBadFabric, "not a fabric handle")
	}
	if m := tryUse(s.byFabric[tok.handle()]); m != nil {
		return s.importHandle(m), nil
	}
	// A token this process made: its file, duplicated before the exporter can close it
	// (unpublish takes the same lock first).
	var file *os.File
	var err error
	exports.Lock()
	e, ok := exports.byFabric[tok]
	if ok {
		file, err = dupFile(e.f)
	}
	exports.Unlock()
	if !ok {
		file, err = openFabric(tok)
	}
	if err != nil {
		return 0, fail(resBadFabric, "allocation not found: "+err.Error())
	}
	k := keyOf(file)
	if m := tryUse(s.byFile[k]); m != nil {
		file.Close()
		return s.importHandle(m), nil
	}
	size, dev := e.size, e.dev
	if !ok {
		st, err := file.Stat()
		if err != nil {
			file.Close()
			return 0, fail(resBadFabric, "allocation not found: "+err.Error())
		}
		size, dev = uint64(st.Size()), int(tok.dev)
	}
	if f := s.importable(size, dev); f != nil {
		file.Close()
		f.err = resBadFabric
		return 0, f
	}
	return s.adopt(&fileStore{f: file}, k, size, dev), nil
}

// ExportWin32 is cuMemExportToShareableHandle for Windows handles. sim models them within
// one Sim only: the value is a token that ImportWin32 of the same Sim accepts.
func (s *Sim) ExportWin32(v cu.MemHandle, t cu.MemHandleType) (uintptr, error) {
	w, f := locked(s, OpExportWin32, func() (uintptr, *failure) {
		if t != cu.MEM_HANDLE_TYPE_WIN32 && t != cu.MEM_HANDLE_TYPE_WIN32_KMT {
			return 0, argFail("not a Win32 handle type")
		}
		m, f := s.exportable(v, t)
		if f != nil {
			return 0, f
		}
		s.nextWin32 += 4
		s.win32[s.nextWin32] = m
		m.win32 = true
		return s.nextWin32, nil
	})
	if f != nil {
		return 0, f.wrap("cuMemExportToShareableHandle", "%v, %d", v, t)
	}
	return w, nil
}

// ImportWin32 is cuMemImportFromShareableHandle for Windows handles (see ExportWin32).
func (s *Sim) ImportWin32(handle uintptr, t cu.MemHandleType) (cu.MemHandle, error) {
	h, f := locked(s, OpImportWin32, func() (cu.MemHandle, *failure) {
		if t != cu.MEM_HANDLE_TYPE_WIN32 && t != cu.MEM_HANDLE_TYPE_WIN32_KMT {
			return 0, argFail("not a Win32 handle type")
		}
		if f := s.vmm(); f != nil {
			return 0, f
		}
		m := tryUse(s.win32[handle])
		if m == nil {
			delete(s.win32, handle)
			return 0, fail(cu.ERROR_INVALID_VALUE, "not an exported handle of this process")
		}
		return s.importHandle(m), nil
	})
	if f != nil {
		return 0, f.wrap("cuMemImportFromShareableHandle", "%#x, %d", handle, t)
	}
	return h, nil
}
