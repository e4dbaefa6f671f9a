package vmm

import (
	"fmt"

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

// copyAt copies p to or from offset off in one driver call, however many allocations the
// range spans (recorded: vmmtest data/copy-across-allocations); a range that is not all
// mapped, with access for the view's device, fails in the driver and copies nothing.
func (v View) copyAt(op string, p []byte, off int64) (int, error) {
	fail := func(err error) (int, error) {
		return 0, opErr(err, op, "%s at offset %d from device %d", units.Size(uint64(len(p))), off, v.dev)
	}
	r := v.r
	if off < 0 {
		return fail(fmt.Errorf("%w: offset %d", ErrOutOfRange, off))
	}
	if err := r.enter(uint64(off), uint64(len(p))); err != nil {
		if err == ErrOutOfRange {
			err = fmt.Errorf("%w: size %s", ErrOutOfRange, units.Size(r.Size()))
		}
		return fail(err)
	}
	defer r.l.exit()
	if len(p) == 0 {
		return 0, nil
	}
	addr := r.base + cu.DevicePtr(off)
	var err error
	if op == "write" {
		err = r.m.WriteAt(v.dev, p, addr)
	} else {
		err = r.m.ReadAt(v.dev, p, addr)
	}
	if err != nil {
		return fail(err)
	}
	return len(p), nil
}
