package vmm_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
	"github.com/stretchr/testify/require"
)

// A reservation's View reads and writes it from one device, pinning it: copies check the
// range, split where mappings meet, run alongside each other and alongside Close, which
// waits for them; after Close they fail with ErrClosed.
func TestView(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	r, err := m.Reserve(6 << 20)
	require.NoError(t, err)
	for i := range 2 {
		a, err := m.Create(2<<20, vmm.DeviceProps(0))
		require.NoError(t, err)
		defer a.Close()
		mp, err := r.Map(uint64(2+2*i)<<20, a)
		require.NoError(t, err)
		require.NoError(t, mp.SetAccess(vmm.ReadWrite(0)...))
	}
	v := r.From(0)
	require.Equal(t, 0, v.Device())
	want := vmmtest.Pattern(3, 8192)
	n, err := v.WriteAt(want, 4<<20-4096) // across the two allocations
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	got := make([]byte, len(want))
	n, err = v.ReadAt(got, 4<<20-4096)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	require.Equal(t, want, got)
	for _, off := range []int64{6<<20 - 1, 1 << 62, -1} {
		_, err := v.ReadAt(got, off)
		require.ErrorIs(t, err, vmm.ErrOutOfRange, "offset %d", off)
	}
	n, err = v.ReadAt(got, 2<<20-4096) // the first page is not mapped
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	require.Zero(t, n)
	n, err = v.WriteAt(nil, 6<<20)
	require.NoError(t, err, "nothing at the end")
	require.Zero(t, n)

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				if _, err := v.ReadAt(buf, 2<<20+int64(i)*4096); err != nil {
					if !errors.Is(err, vmm.ErrClosed) {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	require.NoError(t, r.Close())
	wg.Wait()
	_, err = v.WriteAt(nil, 0)
	require.ErrorIs(t, err, vmm.ErrClosed, "after Close, even of nothing")
	var nilResv *vmm.Reservation
	for _, v := range []vmm.View{nilResv.From(0), (&vmm.Reservation{}).From(0), {}} {
		_, err := v.ReadAt(got, 0)
		require.ErrorIs(t, err, vmm.ErrInvalid)
		require.ErrorContains(t, err, "read")
	}
}
