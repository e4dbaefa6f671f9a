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
	r     *Reservation
	dev   int
	split uint64 // no copy crosses a multiple of it; 0: none
}

// From returns the reservation as device dev reaches it.
func (r *Reservation) From(dev int) View { return View{r: r, dev: dev} }

// Device is the device whose context the view copies from.
func (v View) Device() int { return v.dev }

// SplitEvery returns v copying no range across a multiple of n: one driver call per piece,
// for memory whose parts lie on different devices (package peer's stripes), where whether
// the driver copies across memory of two devices in one call is not recorded.
func (v View) SplitEvery(n uint64) View {
	v.split = n
	return v
}

// ReadAt reads len(p) bytes at offset off of the reservation into p.
func (v View) ReadAt(p []byte, off int64) (int, error) { return v.copyAt("read", p, off) }

// WriteAt writes p at offset off of the reservation.
func (v View) WriteAt(p []byte, off int64) (int, error) { return v.copyAt("write", p, off) }

// copyAt copies p to or from offset off in one driver call, however many allocations of
// one device the range spans (recorded: vmmtest data/copy-across-allocations), or one per
// piece of a split view; a range that is not all mapped, with access for the view's
// device, fails in the driver. It returns how many bytes were copied before an error.
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
	pos, done := uint64(off), 0
	for done < len(p) {
		n := uint64(len(p) - done)
		if v.split != 0 {
			n = min(n, v.split-pos%v.split)
		}
		q, addr := p[done:done+int(n)], r.base+cu.DevicePtr(pos)
		var err error
		if op == "write" {
			err = r.m.WriteAt(v.dev, q, addr)
		} else {
			err = r.m.ReadAt(v.dev, q, addr)
		}
		if err != nil {
			return fail(done, err)
		}
		done, pos = done+int(n), pos+n
	}
	return done, nil
}
