package vmm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

const mib = 1 << 20

// build runs one transaction: a reservation of n chunks, each created, mapped and given
// access; on error it rolls back.
func build(m *vmm.Manager, p *vmm.Pending, n int) (*vmm.Reservation, error) {
	tx := m.Begin(p)
	r, err := tx.Reserve(uint64(n) * 2 * mib)
	if err != nil {
		return nil, tx.Rollback(err)
	}
	for i := range n {
		a, err := tx.Create(2*mib, vmm.DeviceProps(0))
		if err != nil {
			return nil, tx.Rollback(err)
		}
		if _, err := tx.Map(r, uint64(i)*2*mib, a); err != nil {
			return nil, tx.Rollback(err)
		}
		// The mapping keeps the memory: dropping the reference now lets the unmap free it
		// (and makes the transaction's undo of the create a no-op).
		if err := a.Close(); err != nil {
			return nil, tx.Rollback(err)
		}
	}
	if err := r.SetAccess(0, r.Size(), vmm.ReadWrite(0)...); err != nil {
		return nil, tx.Rollback(err)
	}
	tx.Commit()
	return r, nil
}

// TestTxRollsBackEveryStep fails each driver call a transaction makes, in turn, and checks
// that the error names the call and nothing is left behind.
func TestTxRollsBackEveryStep(t *testing.T) {
	calls := map[sim.Op]int{sim.OpReserve: 1, sim.OpCreate: 3, sim.OpMap: 3, sim.OpRelease: 3, sim.OpSetAccess: 1}
	for op, n := range calls {
		for nth := 1; nth <= 3; nth++ {
			s := newSim(t)
			m := vmm.New(s)
			if err := s.FailNth(op, nth, cu.ERROR_OUT_OF_MEMORY); err != nil {
				t.Fatal(err)
			}
			var p vmm.Pending
			r, err := build(m, &p, 3)
			if err == nil {
				if nth <= n {
					t.Fatalf("%s #%d: no error", op, nth)
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if !errors.Is(err, cu.ERROR_OUT_OF_MEMORY) {
				t.Fatalf("%s #%d: %v", op, nth, err)
			}
			if err := p.Retry(); err != nil {
				t.Fatalf("%s #%d: retry: %v", op, nth, err)
			}
			if st := s.Stats(); !st.Clean() {
				t.Fatalf("%s #%d: leaked %+v after %v", op, nth, st, err)
			}
		}
	}
}

// TestTxPendingKeepsRefusedReleases: a release the driver refuses during a rollback waits in
// Pending and succeeds on retry.
func TestTxPendingKeepsRefusedReleases(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	var p vmm.Pending
	tx := m.Begin(&p)
	a, err := tx.Create(2*mib, vmm.DeviceProps(0))
	if err != nil {
		t.Fatal(err)
	}
	_ = a
	if err := s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("later step failed")
	if err := tx.Rollback(cause); err != cause {
		t.Fatalf("Rollback = %v, want the cause alone", err)
	}
	if p.Len() != 1 || s.Stats().Clean() {
		t.Fatalf("pending %d, stats %+v: want the refused release kept", p.Len(), s.Stats())
	}
	if err := p.Retry(); err != nil || p.Len() != 0 || !s.Stats().Clean() {
		t.Fatalf("retry: %v, pending %d, stats %+v", err, p.Len(), s.Stats())
	}
}

// TestTxRestoreFailureBreaks: a restore step that fails makes Rollback report ErrBroken and
// breaks the object whose Pending the transaction was begun with, not the Manager.
func TestTxRestoreFailureBreaks(t *testing.T) {
	m := vmm.New(newSim(t))
	var p vmm.Pending
	for _, tx := range []*vmm.Tx{m.Begin(nil), m.Begin(&p)} {
		tx.Restore("map back", func() error { return cu.ERROR_INVALID_VALUE })
		err := tx.Rollback(errors.New("boom"))
		if !errors.Is(err, vmm.ErrBroken) || !errors.Is(err, cu.ERROR_INVALID_VALUE) {
			t.Fatalf("Rollback = %v, want ErrBroken wrapping the restore's error", err)
		}
	}
	if err := p.Broken(); !errors.Is(err, vmm.ErrBroken) || !strings.Contains(err.Error(), "map back") {
		t.Fatalf("Pending.Broken = %v", err)
	}
	if err := m.Pending().Broken(); err != nil {
		t.Fatalf("the Manager's Pending is broken: %v", err)
	}
	if err := (*vmm.Pending)(nil).Broken(); err != nil {
		t.Fatal(err)
	}
}

// TestReservationRanges: one unmap and one set access over several mappings; a range that
// splits a mapping is refused before the driver; Close unmaps what is left in one call.
func TestReservationRanges(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	var p vmm.Pending
	r, err := build(m, &p, 4)
	if err != nil {
		t.Fatal(err)
	}
	unmaps := s.Stats().Calls["Unmap"]
	if err := r.Unmap(mib, 2*mib); !errors.Is(err, vmm.ErrInvalid) {
		t.Fatalf("unmap splitting mappings: %v", err)
	}
	if err := r.Unmap(2*mib, 4*mib); err != nil {
		t.Fatal(err)
	}
	if err := r.Unmap(2*mib, 4*mib); err != nil { // gaps only: still one call, no error
		t.Fatal(err)
	}
	if err := r.SetAccess(0, 2*mib, vmm.ReadOnly(0)...); err != nil {
		t.Fatal(err)
	}
	if err := r.Unmap(8*mib, 2*mib); !errors.Is(err, vmm.ErrOutOfRange) {
		t.Fatalf("unmap past the end: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Calls["Unmap"] - unmaps; got != 2 {
		t.Fatalf("%d unmap calls, want 2 (one range, one close)", got)
	}
	if st := s.Stats(); !st.Clean() {
		t.Fatalf("leaked %+v", st)
	}
}

// TestMulticast drives the typed multicast object on sim: create, add devices, bind memory
// of each, map, unbind on Close, nothing left.
func TestMulticast(t *testing.T) {
	s, err := sim.New(sim.PresetHGX8())
	if err != nil {
		t.Fatal(err)
	}
	m := vmm.New(s)
	props := vmm.MulticastProps{Devices: 2, Size: 2 * mib}
	g, err := m.MulticastGranularity(props, false)
	if err != nil {
		t.Fatal(err)
	}
	props.Size = g
	mc, err := m.CreateMulticast(props)
	if err != nil {
		t.Fatal(err)
	}
	for dev := range 2 {
		if err := mc.AddDevice(dev); err != nil {
			t.Fatal(err)
		}
	}
	for dev := range 2 {
		a, err := m.Create(g, vmm.DeviceProps(dev))
		if err != nil {
			t.Fatal(err)
		}
		if err := mc.Bind(0, a, 0, g); err != nil {
			t.Fatal(err)
		}
		defer a.Close()
	}
	r, err := m.Reserve(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.MapMulticast(0, mc); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := mc.AddDevice(0); !errors.Is(err, vmm.ErrClosed) {
		t.Fatalf("AddDevice after Close: %v", err)
	}
	if _, err := m.CreateMulticast(vmm.MulticastProps{Size: g}); !errors.Is(err, vmm.ErrInvalid) {
		t.Fatalf("no devices: %v", err)
	}
}

// What no caller holds goes to the Manager's own list when the driver refuses to release
// it: the undo of a transaction begun without a list, and the reference Pointer retained.
// The next Create or Reserve retries it, so that nothing stays once the driver accepts.
func TestManagerPendingKeepsOrphans(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	tx := m.Begin(nil)
	if _, err := tx.Create(2*mib, vmm.DeviceProps(0)); err != nil {
		t.Fatal(err)
	}
	if err := s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("later step failed")
	if err := tx.Rollback(cause); err != cause {
		t.Fatalf("Rollback = %v, want the cause alone", err)
	}
	if n := m.Pending().Len(); n != 1 {
		t.Fatalf("the Manager keeps %d releases, want 1", n)
	}

	// Pointer's retained reference.
	r, err := m.Reserve(2 * mib)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Create(2*mib, vmm.DeviceProps(0)) // retries the list first: it is empty now
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Pending().Len(); n != 0 {
		t.Fatalf("Create left %d releases in the list", n)
	}
	mp, err := r.Map(0, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetAccess(0, 2*mib, vmm.ReadWrite(0)...); err != nil {
		t.Fatal(err)
	}
	if err := s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pointer(r.Base()); err == nil || !errors.Is(err, cu.ERROR_UNKNOWN) {
		t.Fatalf("Pointer with its release refused: %v", err)
	}
	if n := m.Pending().Len(); n != 1 {
		t.Fatalf("the Manager keeps %d releases, want 1", n)
	}
	for _, c := range []interface{ Close() error }{mp, a, r} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if s.Stats().Clean() {
		t.Fatal("the retained reference was dropped without a release")
	}
	if err := m.Pending().Retry(); err != nil || m.Pending().Len() != 0 || !s.Stats().Clean() {
		t.Fatalf("retry: %v, pending %d, stats %+v", err, m.Pending().Len(), s.Stats())
	}
	if (*vmm.Manager)(nil).Pending() != nil {
		t.Fatal("a nil Manager has a list")
	}
}

// A nil Manager's Pending is nil, and a nil Pending is empty: its methods neither panic nor
// keep anything.
func TestNilPending(t *testing.T) {
	var m *vmm.Manager
	p := m.Pending()
	if p != nil {
		t.Fatalf("a nil Manager's Pending = %p, want nil", p)
	}
	refused := errors.New("refused")
	runs := 0
	release := func() error { runs++; return refused }
	if err := p.Do("release", release); err != refused || runs != 1 {
		t.Fatalf("Do = %v after %d runs, want the release's error after one", err, runs)
	}
	p.Add("release", release)
	if n := p.Len(); n != 0 {
		t.Fatalf("Len = %d, want 0", n)
	}
	if err := p.Retry(); err != nil || runs != 1 {
		t.Fatalf("Retry = %v after %d runs, want nil and no run", err, runs)
	}
	var q vmm.Pending
	q.Add("release", release)
	p.MoveTo(&q)
	q.MoveTo(p)
	if n := q.Len(); n != 1 {
		t.Fatalf("after MoveTo to and from nil, %d kept, want 1", n)
	}
}
