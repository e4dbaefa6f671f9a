package vmm

import (
	"fmt"
	"slices"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
)

// View is a reservation read and written from one device's context: an io.ReaderAt and
// io.WriterAt over its bytes, which reach as far as that device's access does. Its copies
// pin the reservation, without a lock: they run alongside each other, Close waits for them,
// and one that starts once Close has begun fails with ErrClosed. Make one with
// Reservation.From; a zero View fails with ErrInvalid.
type View struct {
	r   *Reservation
	dev int
}

// From returns the reservation as device dev reaches it.
func (r *Reservation) From(dev int) View { return View{r: r, dev: dev} }

// Device is the device whose context the view copies from.
func (v View) Device() int { return v.dev }

// ReadAt reads len(p) bytes at offset off of the reservation into p.
func (v View) ReadAt(p []byte, off int64) (int, error) { return v.copyAt("read", p, off) }

// WriteAt writes p at offset off of the reservation.
func (v View) WriteAt(p []byte, off int64) (int, error) { return v.copyAt("write", p, off) }

// copyAt copies p to or from offset off, one driver call per mapping it touches (whether
// the driver copies across two allocations in one call is not recorded yet), and returns
// how many bytes were copied before an error.
func (v View) copyAt(op string, p []byte, off int64) (int, error) {
	fail := func(done int, err error) (int, error) {
		return done, opErr(err, op, "%s at offset %d from device %d", units.Size(uint64(len(p))), off, v.dev)
	}
	r := v.r
	if off < 0 {
		return fail(0, fmt.Errorf("%w: offset %d", ErrOutOfRange, off))
	}
	if err := r.enter(uint64(off), uint64(len(p))); err != nil {
		if err == ErrOutOfRange {
			err = fmt.Errorf("%w: size %s", ErrOutOfRange, units.Size(r.Size()))
		}
		return fail(0, err)
	}
	defer r.l.exit()
	addr, end := r.base+cu.DevicePtr(off), r.base+cu.DevicePtr(off)+cu.DevicePtr(len(p))
	done := 0
	for addr < end {
		next := min(end, r.mappingEnd(addr))
		q := p[done : done+int(next-addr)]
		var err error
		if op == "write" {
			err = r.m.WriteAt(v.dev, q, addr)
		} else {
			err = r.m.ReadAt(v.dev, q, addr)
		}
		if err != nil {
			return fail(done, err)
		}
		done, addr = done+len(q), next
	}
	return done, nil
}

// mappingEnd is the end of the mapping that holds addr, or the end of the address space
// where none does (the copy then fails in the driver).
func (r *Reservation) mappingEnd(addr cu.DevicePtr) cu.DevicePtr {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, found := slices.BinarySearchFunc(r.maps, addr, byAddr)
	if !found && i > 0 {
		i--
	}
	if i < len(r.maps) && r.maps[i].addr <= addr && r.maps[i].end() > addr {
		return r.maps[i].end()
	}
	return ^cu.DevicePtr(0)
}
