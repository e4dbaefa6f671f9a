package sim

import (
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// newShareFile creates the backing file of an exportable allocation: an anonymous memfd,
// sparse, so size costs nothing until written. Fabric allocations need no named file on
// Linux: importers reach the memfd through /proc/<pid>/fd/<fd>.
func newShareFile(name string, size uint64, _ bool) (*os.File, string, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, "", fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, "", err
	}
	return f, "", nil
}

// memfdName returns the name of the memfd open on fd, or false if fd is not a memfd.
func memfdName(fd int) (string, bool) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", false
	}
	name, ok := strings.CutPrefix(link, "/memfd:")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(name, " (deleted)"), true
}

// notMemfd says whether fd, open, is not a memfd, as every descriptor sim exports is here.
// F_GET_SEALS answers for a memfd only and asks no file system, where an fstat or close of
// a FUSE file waits for its server, under sim's lock.
func notMemfd(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != unix.EBADF {
		return err != nil
	}
	// Closed, for dup to report; or open with O_PATH, which F_GET_SEALS refuses so too and
	// fstat does not, while F_GETFD answers.
	_, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// describeFile takes f, a descriptor another process (or another Sim) exported, as the
// store of the allocation it holds, and says its size and device: an allocation in an
// arena, or the memfd of an allocation also shareable as a fabric handle, named as sim
// names them. For anything else ok is false and f stays the caller's.
func describeFile(f *os.File) (st store, size uint64, dev int, ok bool) {
	name, ok := memfdName(int(f.Fd()))
	if !ok {
		return nil, 0, 0, false
	}
	if name == arenaName {
		return openArena(f)
	}
	dev, sum, ok := parseFileName(name)
	if !ok || sum == "" {
		return nil, 0, 0, false
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() <= 0 {
		return nil, 0, 0, false
	}
	return &fileStore{f: f}, uint64(fi.Size()), dev, true
}

// openFabric opens the memfd a fabric token leads to in another process. The path comes
// from the token, so nothing is opened for reading or writing until the file is known to
// bear the token's device and secret: first a path-only descriptor (O_PATH: no open of
// the file itself, so no device, pipe or regular file is touched), whose target must be a
// memfd named with them (the secret's digest); then the same file, reopened through that
// descriptor.
func openFabric(tok fabricToken) (*os.File, error) {
	pfd, err := unix.Open(fmt.Sprintf("/proc/%d/fd/%d", tok.pid, tok.fd), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	name, ok := memfdName(pfd)
	if !ok {
		return nil, fmt.Errorf("descriptor %d of process %d is not a sim allocation", tok.fd, tok.pid)
	}
	// The device too: the importer takes the token's device for the memory's.
	if dev, sum, ok := parseFileName(name); !ok || dev != int(tok.dev) || subtle.ConstantTimeCompare([]byte(sum), []byte(digest(&tok.secret))) != 1 {
		return nil, fmt.Errorf("descriptor %d of process %d is not the token's allocation", tok.fd, tok.pid)
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "memfd:"+name)
	var a, b unix.Stat_t
	if unix.Fstat(pfd, &a) != nil || unix.Fstat(fd, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		f.Close()
		return nil, fmt.Errorf("descriptor %d of process %d changed while it was opened", tok.fd, tok.pid)
	}
	return f, nil
}

// The arena. The driver opens every descriptor it exports on one file, /dev/nvidiactl, and
// tells them apart by what it keeps behind each open file: fstat of any two shows the same
// device and inode. sim does the same, so that what tells descriptors apart above the
// driver is tested as it will run: every allocation exportable as a POSIX descriptor (and
// not also as a fabric handle, which needs a file of its own) lives in this process's
// arena, a sparse memfd (one for as long as the process holds such an allocation; a new
// one after a time with none), at an offset past a header that says its device and size; each
// export is a new open file description of the arena whose file offset is that header's.
// An importer reads the header where the offset says, so reading or seeking an exported
// descriptor (which the driver's refuse) changes which allocation it names, for every
// holder of it. An export holds the allocation as the driver's does: its open file
// description holds a shared OFD lock on the header, and the exporter gives the range back
// once no such lock is left, at its next export or release. sim isolates nothing: whoever
// holds one export can read and write every allocation in the arena through it.
const (
	arenaName   = "cuvmm-sim.exports"
	arenaMagic  = "cuvmm-sim-alloc\x00"
	arenaHeader = pageSize // the header's room, so that the bytes after it stay page-aligned
	arenaHdrLen = 40       // magic 16, device 8, size 8, offset 8
)

type exportArena struct {
	mu      sync.Mutex
	f       *os.File // the process's own description, which no export is
	next    uint64   // the offset of the next allocation's header (never 0: 0 is no arena)
	live    int      // allocations not yet freed
	retired []arenaStore
}

var arena exportArena

// arenaStore is an allocation in an arena: f a description of it (the process's own, or an
// importer's private one), off where its bytes start.
type arenaStore struct {
	fileStore
	base, size uint64
	own        bool     // this process's arena: close gives the range back
	held       *os.File // imported: the description that came, whose lock holds the allocation
}

// newExportable makes the store of an allocation exportable only as a POSIX descriptor, and
// the key an import of one of its exports finds it by.
func newExportable(dev int, size uint64) (store, fileKey, error) {
	arena.mu.Lock()
	defer arena.mu.Unlock()
	arena.reap()
	if arena.f == nil {
		fd, err := unix.MemfdCreate(arenaName, unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fileKey{}, fmt.Errorf("memfd_create: %w", err)
		}
		arena.f, arena.next = os.NewFile(uintptr(fd), "memfd:"+arenaName), arenaHeader
	}
	base := arena.next
	end := base + arenaHeader + (size+pageSize-1)/pageSize*pageSize
	if err := arena.f.Truncate(int64(end)); err != nil {
		return nil, fileKey{}, err
	}
	var h [arenaHdrLen]byte
	copy(h[:], arenaMagic)
	le := binary.LittleEndian
	le.PutUint64(h[16:], uint64(dev))
	le.PutUint64(h[24:], size)
	le.PutUint64(h[32:], base)
	if _, err := arena.f.WriteAt(h[:], int64(base)); err != nil {
		return nil, fileKey{}, err
	}
	arena.next, arena.live = end, arena.live+1
	k := keyOf(arena.f)
	k.off = base
	return &arenaStore{fileStore: fileStore{f: arena.f, off: base + arenaHeader}, base: base, size: size, own: true}, k, nil
}

// exportFD returns a new descriptor of st's allocation for the caller to own.
func exportFD(st store) (int, error) {
	a, ok := st.(*arenaStore)
	if !ok {
		return dupFD(st.(*fileStore).f.Fd())
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(a.f.Fd())), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: int64(a.base), Len: 1}
	if _, err = unix.Seek(fd, int64(a.base), io.SeekStart); err == nil {
		err = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// held reports whether an export of the allocation at base is still open somewhere.
func (ar *exportArena) held(base uint64) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(base), Len: 1}
	err := unix.FcntlFlock(ar.f.Fd(), unix.F_OFD_GETLK, &lk)
	return err != nil || lk.Type != unix.F_UNLCK
}

// reap gives back the ranges of freed allocations that no export holds any more; the
// caller holds mu. Once no allocation is live the arena is let go at once: the exports still
// open hold the file, and the kernel frees it with the last of them.
func (ar *exportArena) reap() {
	if ar.live == 0 && ar.f != nil {
		ar.f.Close()
		ar.f, ar.next, ar.retired = nil, 0, nil
		return
	}
	ar.retired = slices.DeleteFunc(ar.retired, func(a arenaStore) bool {
		if ar.held(a.base) {
			return false
		}
		// The header too: a stale description finds no allocation there.
		_ = unix.Fallocate(int(ar.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(a.base), int64(arenaHeader+a.size))
		return true
	})
}

func (a *arenaStore) resident() uint64 {
	var n uint64
	fd := int(a.f.Fd())
	for at, end := int64(a.off), int64(a.off+a.size); at < end; {
		data, err := unix.Seek(fd, at, unix.SEEK_DATA)
		if err != nil || data >= end {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			break
		}
		n += uint64(min(hole, end) - data)
		at = hole
	}
	return n
}

func (a *arenaStore) close() {
	if !a.own {
		a.f.Close()
		a.held.Close()
		return
	}
	arena.mu.Lock()
	defer arena.mu.Unlock()
	arena.live--
	arena.retired = append(arena.retired, *a)
	arena.reap()
}

// openArena takes f, a descriptor of another process's arena (or of this one's, exported by
// another Sim) whose file offset is an allocation's header, if the header there says one.
func openArena(f *os.File) (st store, size uint64, dev int, ok bool) {
	pos, err := unix.Seek(int(f.Fd()), 0, io.SeekCurrent)
	if err != nil || pos <= 0 {
		return nil, 0, 0, false
	}
	var h [arenaHdrLen]byte
	le := binary.LittleEndian
	if _, err := f.ReadAt(h[:], pos); err != nil || string(h[:16]) != arenaMagic || le.Uint64(h[32:]) != uint64(pos) {
		return nil, 0, 0, false
	}
	dev64, size := le.Uint64(h[16:]), le.Uint64(h[24:])
	if dev64 > 1<<20 {
		return nil, 0, 0, false
	}
	// Reads and writes go through a description of its own, so that no seek of its moves
	// the offset that tells which allocation the received one is.
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, 0, false
	}
	private := os.NewFile(uintptr(fd), f.Name())
	return &arenaStore{fileStore: fileStore{f: private, off: uint64(pos) + arenaHeader}, base: uint64(pos), size: size, held: f}, size, int(dev64), true
}
