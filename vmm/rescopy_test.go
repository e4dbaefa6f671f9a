package vmm_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Copies through a reservation pin it: they check the range, run alongside each other and
// alongside Close, which waits for them; after Close they fail with ErrClosed.
func TestReservationCopies(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	r, err := m.Reserve(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Create(2<<20, vmm.DeviceProps(0))
	if err != nil {
		t.Fatal(err)
	}
	mp, err := r.Map(2<<20, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := mp.SetAccess(vmm.ReadWrite(0)...); err != nil {
		t.Fatal(err)
	}
	if err := r.CopyIn(0, 3<<20, []byte("pinned")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if err := r.CopyOut(0, got, 3<<20); err != nil || string(got) != "pinned" {
		t.Fatalf("read back %q, %v", got, err)
	}
	for _, err := range []error{
		r.CopyIn(0, 4<<20-1, got),
		r.CopyOut(0, got, 1<<63),
		r.CopyIn(0, 4<<20+1, nil),
	} {
		if !errors.Is(err, vmm.ErrOutOfRange) {
			t.Errorf("out of range: %v", err)
		}
	}
	if err := r.CopyOut(0, got, 0); !errors.Is(err, cu.ERROR_INVALID_VALUE) {
		t.Errorf("unmapped: %v", err)
	}
	if err := r.CopyIn(0, 4<<20, nil); err != nil {
		t.Errorf("nothing at the end: %v", err)
	}

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				if err := r.CopyOut(0, buf, 2<<20+uint64(i)*4096); err != nil {
					if !errors.Is(err, vmm.ErrClosed) {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := r.CopyIn(0, 0, nil); !errors.Is(err, vmm.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var nilResv *vmm.Reservation
	for _, err := range []error{nilResv.CopyIn(0, 0, nil), (&vmm.Reservation{}).CopyOut(0, nil, 0)} {
		if !errors.Is(err, vmm.ErrInvalid) || !strings.Contains(err.Error(), "copy") {
			t.Errorf("nil or zero: %v", err)
		}
	}
	if !s.Stats().Clean() {
		t.Errorf("%+v", s.Stats())
	}
}
