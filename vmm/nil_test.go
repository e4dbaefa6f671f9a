package vmm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// TestNilAndZeroValues calls every method of the typed layer with nil receivers, zero values
// and nil arguments: each returns an error that matches ErrInvalid (and the driver's
// CUDA_ERROR_INVALID_VALUE) and names its operation, and none panics.
func TestNilAndZeroValues(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	res, err := m.Reserve(2 << 20)
	if err != nil {
		t.Fatal(err)
	}

	var (
		nilManager  *vmm.Manager
		zeroManager = &vmm.Manager{}
		nilBackend  = vmm.New(nil)
		nilSim      = vmm.New((*sim.Sim)(nil)) // sim.New's result after an ignored error
		nilAlloc    *vmm.Allocation
		zeroAlloc   = &vmm.Allocation{}
		nilResv     *vmm.Reservation
		zeroResv    = &vmm.Reservation{}
		nilMapping  *vmm.Mapping
		zeroMapping = &vmm.Mapping{}
	)
	calls := map[string]func() error{}
	for name, mgr := range map[string]*vmm.Manager{"nil": nilManager, "zero": zeroManager, "nil backend": nilBackend, "nil *sim.Sim": nilSim} {
		calls[name+" Manager.Create"] = func() error { _, err := mgr.Create(2<<20, vmm.DeviceProps(0)); return err }
		calls[name+" Manager.Reserve"] = func() error { _, err := mgr.Reserve(2 << 20); return err }
		calls[name+" Manager.Retain"] = func() error { _, err := mgr.Retain(0x1000); return err }
		calls[name+" Manager.ImportFD"] = func() error { _, err := mgr.ImportFD(3, 2<<20); return err }
		calls[name+" Manager.ImportFabric"] = func() error { _, err := mgr.ImportFabric(cu.MemFabricHandle{}, 2<<20); return err }
		calls[name+" Manager.Granularity"] = func() error { _, err := mgr.Granularity(vmm.DeviceProps(0), false); return err }
		calls[name+" Manager.WriteAt"] = func() error { return mgr.WriteAt(0, []byte{1}, 0x1000) }
		calls[name+" Manager.ReadAt"] = func() error { return mgr.ReadAt(0, []byte{1}, 0x1000) }
	}
	for name, a := range map[string]*vmm.Allocation{"nil": nilAlloc, "zero": zeroAlloc} {
		calls[name+" Allocation.Properties"] = func() error { _, err := a.Properties(); return err }
		calls[name+" Allocation.Compressible"] = func() error { _, err := a.Compressible(); return err }
		calls[name+" Allocation.ExportFD"] = func() error { _, err := a.ExportFD(); return err }
		calls[name+" Allocation.ExportFabric"] = func() error { _, err := a.ExportFabric(); return err }
		calls[name+" Allocation.Close"] = a.Close
		calls["Reservation.Map of a "+name+" Allocation"] = func() error { _, err := res.Map(0, a); return err }
	}
	for name, r := range map[string]*vmm.Reservation{"nil": nilResv, "zero": zeroResv} {
		calls[name+" Reservation.Map"] = func() error {
			a, err := m.Create(2<<20, vmm.DeviceProps(0))
			if err != nil {
				return err
			}
			defer a.Close()
			_, err = r.Map(0, a)
			return err
		}
		calls[name+" Reservation.Close"] = r.Close
	}
	other, err := vmm.New(newSim(t)).Create(2<<20, vmm.DeviceProps(0))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// Its handle names another allocation, or none, in m's backend.
	calls["Reservation.Map of another backend's Allocation"] = func() error { _, err := res.Map(0, other); return err }
	var nilTx *vmm.Tx
	region, err := m.NewRegion(2<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls["nil Tx.Create"] = func() error { _, err := nilTx.Create(2<<20, vmm.DeviceProps(0)); return err }
	calls["nil Tx.Reserve"] = func() error { _, err := nilTx.Reserve(2 << 20); return err }
	calls["nil Tx.NewRegion"] = func() error { _, err := nilTx.NewRegion(2<<20, 0); return err }
	calls["nil Tx.Map"] = func() error { _, err := nilTx.Map(res, 0, other); return err }
	calls["nil Tx.MapAll"] = func() error { _, err := nilTx.MapAll(res, 0, nil, other); return err }
	calls["nil Tx.MapAll of nothing"] = func() error { _, err := nilTx.MapAll(res, 0, nil); return err }
	calls["nil Tx.Add"] = func() error { return nilTx.Add(region, 0, nil) }
	calls["nil Tx.Remove"] = func() error { _, err := nilTx.Remove(region, 0, 2<<20); return err }
	for name, mp := range map[string]*vmm.Mapping{"nil": nilMapping, "zero": zeroMapping} {
		calls[name+" Mapping.SetAccess"] = func() error { return mp.SetAccess(vmm.ReadWrite(0)...) }
		calls[name+" Mapping.Access"] = func() error { _, err := mp.Access(0); return err }
		calls[name+" Mapping.Close"] = mp.Close
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic: %v", p)
					}
				}()
				err = call()
			}()
			if !errors.Is(err, vmm.ErrInvalid) || !errors.Is(err, cu.ERROR_INVALID_VALUE) {
				t.Fatalf("error %v, want one matching ErrInvalid and CUDA_ERROR_INVALID_VALUE", err)
			}
			var e *vmm.Error
			if !errors.As(err, &e) || e.Op == "" || !strings.Contains(err.Error(), e.Op) {
				t.Fatalf("error %q does not name its operation", err)
			}
		})
	}
	// A nil Tx has nothing to end or undo.
	nilTx.OnRollback("release", func() error { return nil })
	nilTx.Restore("restore", func() error { return nil })
	nilTx.Commit()
	if cause := errors.New("cause"); nilTx.Rollback(cause) != cause {
		t.Fatal("a nil Tx's Rollback does not return its cause")
	}
	// Accessors of nil values answer zero rather than panic.
	if nilAlloc.Size() != 0 || nilAlloc.Handle() != 0 || nilResv.Base() != 0 || nilResv.Size() != 0 ||
		nilMapping.Addr() != 0 || nilMapping.Size() != 0 || nilManager.Backend() != nil {
		t.Fatal("accessors of nil values answer non-zero")
	}
	if err := errors.Join(res.Close(), region.Close()); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); !st.Clean() {
		t.Fatalf("leaked: %+v", st)
	}
}
