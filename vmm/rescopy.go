package vmm

import "github.com/cuvmm/cuvmm/cu"

// CopyIn writes src at offset off of the reservation, from device dev's context, in one
// driver call. The copy pins the reservation, without a lock: Close waits for it, and a
// copy once Close has begun fails with ErrClosed. The range must lie in the reservation
// (else ErrOutOfRange) and be mapped with write access for dev.
func (r *Reservation) CopyIn(dev int, off uint64, src []byte) error {
	n := uint64(len(src))
	if err := r.enter(off, n); err != nil {
		return opErr(err, "copy in", "%s device %d", rangeArgs(r.Base()+cu.DevicePtr(off), n), dev)
	}
	defer r.l.exit()
	if n == 0 {
		return nil
	}
	return r.m.CopyIn(dev, r.base+cu.DevicePtr(off), src)
}

// CopyOut reads len(dst) bytes at offset off of the reservation, from device dev's
// context, in one driver call; it pins the reservation as CopyIn does.
func (r *Reservation) CopyOut(dev int, dst []byte, off uint64) error {
	n := uint64(len(dst))
	if err := r.enter(off, n); err != nil {
		return opErr(err, "copy out", "%s device %d", rangeArgs(r.Base()+cu.DevicePtr(off), n), dev)
	}
	defer r.l.exit()
	if n == 0 {
		return nil
	}
	return r.m.CopyOut(dev, dst, r.base+cu.DevicePtr(off))
}
