package vmmtest

import (
	"bytes"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/vmm"
)

// janitor undoes, in reverse order and ignoring errors, whatever a case created, so that a
// failing case leaks nothing and the next starts clean. Undoing something the case already
// undid only gets an error from the backend (cu never passes a dead handle to the driver).
type janitor struct {
	t     *testing.T
	b     vmm.Backend
	steps []func()
}

func newJanitor(t *testing.T, b vmm.Backend) *janitor {
	j := &janitor{t: t, b: b}
	t.Cleanup(func() {
		for i := len(j.steps) - 1; i >= 0; i-- {
			j.steps[i]()
		}
	})
	return j
}

func (j *janitor) create(size uint64, prop *cu.MemAllocationProp) (cu.MemHandle, error) {
	return j.adopt(j.b.Create(size, prop, 0))
}

func (j *janitor) mustCreate(size uint64, prop *cu.MemAllocationProp) cu.MemHandle {
	j.t.Helper()
	h, err := j.create(size, prop)
	noError(j.t, err, "create %d", size)
	return h
}

// undo registers step, to run when the test ends, if err is nil, and returns err.
func (j *janitor) undo(err error, step func()) error {
	if err == nil {
		j.steps = append(j.steps, step)
	}
	return err
}

// adopt registers h for release when err is nil, and returns both: it takes what a call
// that makes a handle (create, import, retain) returned.
func (j *janitor) adopt(h cu.MemHandle, err error) (cu.MemHandle, error) {
	return h, j.undo(err, func() { _ = j.b.Release(h) })
}

func (j *janitor) reserve(size uint64, hint cu.DevicePtr) (cu.DevicePtr, error) {
	va, err := j.b.Reserve(size, 0, hint, 0)
	return va, j.undo(err, func() { _ = j.b.Free(va, size) })
}

func (j *janitor) mustReserve(size uint64) cu.DevicePtr {
	j.t.Helper()
	va, err := j.reserve(size, 0)
	noError(j.t, err, "reserve %d", size)
	return va
}

func (j *janitor) mapAt(va cu.DevicePtr, size, off uint64, h cu.MemHandle, flags uint64) error {
	return j.undo(j.b.Map(va, size, off, h, flags), func() { _ = j.b.Unmap(va, size) })
}

func (j *janitor) mustMap(va cu.DevicePtr, size, off uint64, h cu.MemHandle) {
	j.t.Helper()
	noError(j.t, j.mapAt(va, size, off, h, 0), "map %v+%d offset %d", va, size, off)
}

// mustExportFD exports h as a POSIX file descriptor, closed when the test ends.
func (j *janitor) mustExportFD(h cu.MemHandle) int {
	j.t.Helper()
	fd, err := j.b.ExportFD(h)
	noError(j.t, err)
	j.t.Cleanup(func() { closeDescriptor(fd) })
	return fd
}

// mustMapping reserves size bytes and maps h there, without access.
func (j *janitor) mustMapping(h cu.MemHandle, size uint64) cu.DevicePtr {
	j.t.Helper()
	va := j.mustReserve(size)
	j.mustMap(va, size, 0, h)
	return va
}

// mustBuffer is create + reserve + map + read-write access for the device of p's location
// (device 0 for host memory): the common starting point of data cases.
func (j *janitor) mustBuffer(size uint64, p *cu.MemAllocationProp) (cu.MemHandle, cu.DevicePtr) {
	j.t.Helper()
	h := j.mustCreate(size, p)
	va := j.mustMapping(h, size)
	noError(j.t, j.b.SetAccess(va, size, rw(int(p.Location.ID))))
	return h, va
}

// mustWrite writes Pattern(seed, n) at va, from device 0, and returns it.
func (j *janitor) mustWrite(va cu.DevicePtr, seed byte, n int) []byte {
	j.t.Helper()
	want := Pattern(seed, n)
	noError(j.t, j.b.CopyHtoD(0, va, want))
	return want
}

// Pattern is deterministic data that differs at every byte offset and per seed, so that a
// copy from the wrong place or an offset error shows. Tests of code built on vmm use it too.
func Pattern(seed byte, n int) []byte { return pattern.Bytes(seed, n) }

func requireBytes(t *testing.T, b vmm.Backend, dev int, va cu.DevicePtr, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	noError(t, b.CopyDtoH(dev, got, va))
	if !bytes.Equal(want, got) {
		i := 0
		for i < len(want) && want[i] == got[i] {
			i++
		}
		t.Fatalf("data at %v differs from byte %d of %d", va, i, len(want))
	}
}
