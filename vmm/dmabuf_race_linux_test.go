package vmm_test

import (
	"sync"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// pausedExport holds the first dma-buf export the driver makes until resume is closed.
type pausedExport struct {
	vmm.Backend
	once             sync.Once
	exported, resume chan struct{}
}

func (b *pausedExport) ExportDmaBuf(ptr cu.DevicePtr, size, flags uint64) (int, error) {
	fd, err := b.Backend.ExportDmaBuf(ptr, size, flags)
	b.once.Do(func() {
		close(b.exported)
		<-b.resume
	})
	return fd, err
}

// requireDescribes checks that d says what sim exported behind its descriptor.
func requireDescribes(t *testing.T, d *vmm.DmaBuf) {
	t.Helper()
	got, err := sim.DmaBufInfo(d.FD())
	require.NoError(t, err)
	require.Equal(t, got.Device, d.Device, "the device")
	require.Equal(t, got.Chunks, d.Chunks, "the chunks")
	require.Equal(t, got.Props, d.Props, "the properties")
}

// A reservation's export and a Mapping.Close with a Map of another device's memory at the
// same offset: the Close waits for the export, so the DmaBuf describes device 0's memory,
// which its descriptor holds. (Before, the DmaBuf said device 0 around device 1's memory.)
func TestReservationExportHoldsOffMappingClose(t *testing.T) {
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	b := &pausedExport{Backend: s, exported: make(chan struct{}), resume: make(chan struct{})}
	m := vmm.New(b)
	r, err := m.Reserve(4 * mib)
	require.NoError(t, err)
	var mps []*vmm.Mapping
	for i, dev := range []int{0, 0, 1} {
		a, err := m.Create(2*mib, rdmaProps(dev))
		require.NoError(t, err)
		defer a.Close()
		if i < 2 {
			mp, err := r.Map(uint64(i)*2*mib, a)
			require.NoError(t, err)
			require.NoError(t, mp.SetAccess(vmm.ReadWrite(0)...))
			mps = append(mps, mp)
		}
	}
	other, err := m.Create(2*mib, rdmaProps(1))
	require.NoError(t, err)
	defer other.Close()

	type result struct {
		d   *vmm.DmaBuf
		err error
	}
	exported := make(chan result, 1)
	go func() {
		d, err := r.ExportDmaBuf(0, 4*mib)
		exported <- result{d, err}
	}()
	<-b.exported
	remapped := make(chan error, 1)
	go func() {
		if err := mps[1].Close(); err != nil {
			remapped <- err
			return
		}
		mp, err := r.Map(2*mib, other)
		if err == nil {
			err = mp.SetAccess(vmm.ReadWrite(1)...)
		}
		remapped <- err
	}()
	select {
	case err := <-remapped:
		t.Fatalf("the mapping was closed and remapped during the export (%v)", err)
	case <-time.After(100 * time.Millisecond):
		// Holding off, as it must; nothing proves it never would, but the unfixed code got
		// through in well under this.
	}
	close(b.resume)
	got := <-exported
	require.NoError(t, got.err)
	require.Equal(t, 0, got.d.Device)
	require.Equal(t, 2, got.d.Chunks)
	requireDescribes(t, got.d)
	require.NoError(t, <-remapped, "the remap goes on once the export is done")
	require.NoError(t, got.d.Close())
	_, err = r.ExportDmaBuf(0, 4*mib)
	require.ErrorIs(t, err, vmm.ErrMixedDevices, "now the range holds two devices' memory")
	require.NoError(t, r.Close())
	require.NoError(t, other.Close())
}

// Manager.ExportDmaBuf knows nothing of who maps the range: when the layout changes between
// its reading and the export, the export is made again, and the DmaBuf says what its
// descriptor holds.
func TestManagerExportReadsTheLayoutAgain(t *testing.T) {
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	b := &pausedExport{Backend: s, exported: make(chan struct{}), resume: make(chan struct{})}
	m := vmm.New(b)
	r, err := m.Reserve(4 * mib)
	require.NoError(t, err)
	big, err := m.Create(4*mib, rdmaProps(0))
	require.NoError(t, err)
	defer big.Close()
	mp, err := r.Map(0, big)
	require.NoError(t, err)
	require.NoError(t, mp.SetAccess(vmm.ReadWrite(0)...))
	type result struct {
		d   *vmm.DmaBuf
		err error
	}
	exported := make(chan result, 1)
	go func() {
		d, err := m.ExportDmaBuf(r.Base(), 4*mib)
		exported <- result{d, err}
	}()
	<-b.exported
	// One 4 MiB chunk of device 0 becomes two 2 MiB chunks of device 1.
	require.NoError(t, mp.Close())
	for i := range 2 {
		a, err := m.Create(2*mib, rdmaProps(1))
		require.NoError(t, err)
		defer a.Close()
		mp, err := r.Map(uint64(i)*2*mib, a)
		require.NoError(t, err)
		require.NoError(t, mp.SetAccess(vmm.ReadWrite(1)...))
	}
	close(b.resume)
	got := <-exported
	require.NoError(t, got.err)
	require.Equal(t, 1, got.d.Device)
	require.Equal(t, 2, got.d.Chunks)
	requireDescribes(t, got.d)
	require.NoError(t, got.d.Close())
	require.NoError(t, r.Close())
}
