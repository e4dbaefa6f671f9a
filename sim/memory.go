package sim

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
)

// pageSize is the unit in which host memory backs simulated physical memory: 64 KiB keeps
// the page index small for large allocations while a 2 MiB allocation written in one place
// costs only one page.
const pageSize = 64 << 10

// store holds the bytes of one physical allocation. Offsets and lengths are within the
// allocation. Stores are safe for concurrent use, as copies move bytes without the Sim's
// lock; the caller holds a user of the allocation, so that close never runs during another
// call.
type store interface {
	readAt(p []byte, off uint64) error
	writeAt(p []byte, off uint64) error
	fill(off, n uint64, v byte) error
	// resident is how many bytes of host memory back the store (touched pages).
	resident() uint64
	close()
}

// heapStore is a store in Go memory, allocated a page at a time on first write; pages never
// written read as zeros.
type heapStore struct {
	mu    sync.Mutex
	pages map[uint64]*[pageSize]byte
}

func (h *heapStore) readAt(p []byte, off uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(p) > 0 {
		pg, in := off/pageSize, off%pageSize
		n := copy(p, zeroPage[in:])
		if page := h.pages[pg]; page != nil {
			copy(p[:n], page[in:])
		} else {
			clear(p[:n])
		}
		p, off = p[n:], off+uint64(n)
	}
	return nil
}

var zeroPage [pageSize]byte

func (h *heapStore) page(pg uint64) *[pageSize]byte {
	if h.pages == nil {
		h.pages = map[uint64]*[pageSize]byte{}
	}
	page := h.pages[pg]
	if page == nil {
		page = new([pageSize]byte)
		h.pages[pg] = page
	}
	return page
}

func (h *heapStore) writeAt(p []byte, off uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(p) > 0 {
		pg, in := off/pageSize, off%pageSize
		n := copy(h.page(pg)[in:], p)
		p, off = p[n:], off+uint64(n)
	}
	return nil
}

func (h *heapStore) fill(off, n uint64, v byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for n > 0 {
		pg, in := off/pageSize, off%pageSize
		k := min(n, pageSize-in)
		page := h.pages[pg]
		switch {
		case v == 0 && page == nil:
			// Untouched pages already read as zeros.
		case v == 0 && k == pageSize:
			delete(h.pages, pg) // hand the memory back; it reads as zeros again
		default:
			b := h.page(pg)[in : in+k]
			for i := range b {
				b[i] = v
			}
		}
		off, n = off+k, n-k
	}
	return nil
}

func (h *heapStore) resident() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return uint64(len(h.pages)) * pageSize
}

func (h *heapStore) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pages = nil
}

// fileStore is a store in a file: the memfd or temporary file of an exportable allocation,
// shared with every process that imported it. The file is sparse, so untouched ranges cost
// nothing and read as zeros.
type fileStore struct {
	f      *os.File
	remove string // a path to delete on close (named temporary files), or ""
	off    uint64 // where the allocation's bytes start in f (past a header in the arena)
}

func (s *fileStore) readAt(p []byte, off uint64) error {
	n, err := s.f.ReadAt(p, int64(s.off+off))
	if n < len(p) {
		clear(p[n:]) // past the end of a file that was cut short reads as zeros
	}
	if err != nil && n < len(p) && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func (s *fileStore) writeAt(p []byte, off uint64) error {
	_, err := s.f.WriteAt(p, int64(s.off+off))
	return err
}

func (s *fileStore) fill(off, n uint64, v byte) error {
	buf := bytes.Repeat([]byte{v}, int(min(n, 1<<20)))
	for n > 0 {
		k := min(n, uint64(len(buf)))
		if err := s.writeAt(buf[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

func (s *fileStore) resident() uint64 { return fileResident(s.f) }

func (s *fileStore) close() {
	s.f.Close()
	if s.remove != "" {
		os.Remove(s.remove)
	}
}

// phys is one physical allocation. It lives while anything uses it: a handle reference, a
// mapping, a multicast binding or a copy in progress; the last of them to go frees it.
type phys struct {
	id   uint64
	size uint64
	prop cu.MemAllocationProp // as cuMemGetAllocationPropertiesFromHandle reports it
	dev  int                  // owning device ordinal, or -1 for host memory
	st   store                // &heap, a *fileStore or (Linux) an *arenaStore
	heap heapStore            // the store of memory that is not shareable
	// users counts what keeps the memory alive.
	users int
	// counted says the bytes count against a capacity: memory created here, not memory
	// imported from another process (which the exporter's device holds).
	counted bool
	// fileKey identifies the backing file of an exportable allocation, so importing a
	// descriptor this process exported finds the same allocation.
	fileKey fileKey
	// fabric is the allocation's fabric handle, when it has one, and token its parts.
	fabric *cu.MemFabricHandle
	token  *fabricToken
	// block is the MEMORY_BLOCK_ID of memory without an id (not shareable), given when a
	// pointer query first asks for it (pointer.go).
	block uint64
	// win32 says a Win32 token names the memory: the token outlives it, so it is not
	// reused once freed.
	win32 bool
}

// fileKey is an allocation's identity in a file: the file's device and inode where the
// platform has them, and the offset of its header in an arena (0 in a file of its own).
type fileKey struct{ dev, ino, off uint64 }
