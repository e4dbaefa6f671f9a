package cu

import (
	"sync"
)

// handleKind tells physical memory from multicast objects; both are
// CUmemGenericAllocationHandle values.
type handleKind uint8

const (
	kindMemory handleKind = iota + 1
	kindMulticast
)

// handleTable records every handle value the driver gave this process and how many
// references the process holds (cuMemCreate, each import, each retain: one each; each
// cuMemRelease: minus one). Calls that pass a handle hold the read lock for the whole
// driver call, so a concurrent release can never free it under them; release takes the
// write lock.
type handleTable struct {
	mu sync.RWMutex
	m  map[MemHandle]handleEntry
}

type handleEntry struct {
	refs int
	kind handleKind
}

var handles = handleTable{m: map[MemHandle]handleEntry{}}

// acquire read-locks the table if h is live (the caller then calls release after the driver
// call); otherwise it returns ErrUnknownHandle and holds nothing.
func (t *handleTable) acquire(h MemHandle) error {
	t.mu.RLock()
	if _, ok := t.m[h]; !ok {
		t.mu.RUnlock()
		return ErrUnknownHandle
	}
	return nil
}

// acquire2 is acquire for calls that take two handles.
func (t *handleTable) acquire2(a, b MemHandle) error {
	t.mu.RLock()
	_, okA := t.m[a]
	_, okB := t.m[b]
	if !okA || !okB {
		t.mu.RUnlock()
		return ErrUnknownHandle
	}
	return nil
}

// done ends what a successful acquire started.
func (t *handleTable) done() { t.mu.RUnlock() }

func (t *handleTable) add(h MemHandle, k handleKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[h]
	if !ok {
		e.kind = k
	}
	e.refs++
	t.m[h] = e
}

// release runs the driver's release under the write lock and drops one reference if it
// succeeded.
func (t *handleTable) release(h MemHandle, driverRelease func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[h]
	if !ok {
		return ErrUnknownHandle
	}
	if err := driverRelease(); err != nil {
		return err
	}
	if e.refs--; e.refs == 0 {
		delete(t.m, h)
	} else {
		t.m[h] = e
	}
	return nil
}

// LiveHandles returns how many distinct handle values the process holds and the sum of their
// reference counts; tests use it to prove that nothing leaks.
func LiveHandles() (handles_, refs int) {
	handles.mu.RLock()
	defer handles.mu.RUnlock()
	for _, e := range handles.m {
		refs += e.refs
	}
	return len(handles.m), refs
}

// HandleKnown reports whether h is a live handle of this process.
func HandleKnown(h MemHandle) bool {
	handles.mu.RLock()
	defer handles.mu.RUnlock()
	_, ok := handles.m[h]
	return ok
}
