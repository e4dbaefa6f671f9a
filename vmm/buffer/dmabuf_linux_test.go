package buffer_test

import (
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// threeChunks is a buffer of three 2 MiB chunks in one reservation.
func threeChunks(t *testing.T, s *sim.Sim, m *vmm.Manager) *buffer.Buffer {
	t.Helper()
	b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact, Reserve: 64 * mib})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	})
	require.NoError(t, b.Grow(4*mib))
	require.NoError(t, b.Grow(6*mib))
	require.Equal(t, 3, b.Stats().Chunks)
	return b
}

func TestExportDmaBufEveryChunk(t *testing.T) {
	s, m := newSim(t)
	b := threeChunks(t, s, m)

	d, err := b.ExportDmaBuf()
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, b.Base(), d.Addr)
	assert.EqualValues(t, 6*mib, d.Size)
	assert.Equal(t, 3, d.Chunks)
	assert.Zero(t, d.Generation)
	info, err := sim.DmaBufInfo(d.FD())
	require.NoError(t, err)
	assert.EqualValues(t, 6*mib, info.Size)
	assert.Equal(t, 3, info.Chunks)

	// The mistake: the extent of the mapping holding the base is the first chunk's.
	_, size, err := s.AddressRange(b.Base())
	require.NoError(t, err)
	assert.EqualValues(t, 2*mib, size)

	r, err := b.ExportDmaBufRange(2*mib, 4*mib)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, b.Base()+2*mib, r.Addr)
	assert.Equal(t, 2, r.Chunks)

	_, err = b.ExportDmaBufRange(4*mib, 4*mib)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	assert.ErrorContains(t, err, "buffer: export dma-buf 4MiB at offset 4194304: out of range: 6MiB committed")
	_, err = b.ExportDmaBufRange(1, 4096)
	require.ErrorIs(t, err, vmm.ErrMisaligned)
}

// Chunks made under Configs that differ in GPUDirect RDMA capability share a descriptor,
// as the driver allows (recorded: vmmtest dmabuf/gpudirect-rdma-and-not); compressible
// chunks are refused before the driver, which fails on them, is asked.
func TestExportDmaBufMixedConfigs(t *testing.T) {
	s, m := newSim(t)
	b := threeChunks(t, s, m)
	p := vmm.DeviceProps(0)
	p.GPUDirectRDMA = true
	require.NoError(t, b.SetConfig(buffer.Config{Props: p}))
	require.NoError(t, b.Grow(8*mib))
	all, err := b.ExportDmaBuf()
	require.NoError(t, err)
	assert.Equal(t, 4, all.Chunks)
	assert.Zero(t, all.Props.GPUDirectRDMACapable, "the first chunk's properties")
	require.NoError(t, all.Close())

	p.Compressible = true
	require.NoError(t, b.SetConfig(buffer.Config{Props: p}))
	require.NoError(t, b.Grow(10*mib))
	calls := s.Stats().Calls["ExportDmaBuf"]
	_, err = b.ExportDmaBuf()
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	assert.ErrorContains(t, err, "(offset 8MiB of the range) is compressible memory")
	assert.Equal(t, calls, s.Stats().Calls["ExportDmaBuf"], "refused before the driver was asked")

	d, err := b.ExportDmaBufRange(0, 6*mib)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	d, err = b.ExportDmaBufRange(6*mib, 2*mib)
	require.NoError(t, err)
	assert.EqualValues(t, 1, d.Props.GPUDirectRDMACapable)
	require.NoError(t, d.Close())
}

// What Grow and Shrink do to a descriptor exported earlier.
func TestExportDmaBufStale(t *testing.T) {
	s, m := newSim(t)
	b := threeChunks(t, s, m)
	whole, err := b.ExportDmaBuf()
	require.NoError(t, err)
	defer whole.Close()
	first, err := b.ExportDmaBufRange(0, 2*mib)
	require.NoError(t, err)
	defer first.Close()
	assert.False(t, b.Stale(whole))

	require.NoError(t, b.Grow(8*mib)) // in place: nothing moved
	assert.False(t, b.Stale(whole))
	assert.Zero(t, b.Generation())

	require.NoError(t, b.Shrink(6*mib)) // releases the chunk past the descriptor's range
	assert.False(t, b.Stale(whole))
	require.NoError(t, b.Shrink(3*mib)) // releases the third chunk, which it covers
	assert.True(t, b.Stale(whole))
	assert.False(t, b.Stale(first), "a shrink past a descriptor's range leaves it")
	require.NoError(t, b.Grow(6*mib)) // other memory where the third chunk was
	assert.True(t, b.Stale(whole))
	assert.EqualValues(t, 2, b.Generation())

	again, err := b.ExportDmaBuf()
	require.NoError(t, err)
	defer again.Close()
	assert.EqualValues(t, 2, again.Generation)
	assert.False(t, b.Stale(again))
	assert.True(t, b.Stale(nil))
	var nilBuf *buffer.Buffer
	assert.True(t, nilBuf.Stale(again))
	assert.Zero(t, nilBuf.Generation())
}

// A Grow that moves the buffer makes every earlier descriptor stale: the memory is the
// same, its addresses are not, and the old range is unmapped.
func TestExportDmaBufStaleAfterRemap(t *testing.T) {
	cfg := sim.PresetH200()
	cfg.RefuseHints = true
	s, err := sim.New(cfg)
	require.NoError(t, err)
	b, err := buffer.New(vmm.New(s), 2*mib, buffer.Options{Reserve: 2 * mib})
	require.NoError(t, err)
	d, err := b.ExportDmaBuf()
	require.NoError(t, err)
	require.NoError(t, b.Grow(4*mib))
	require.Equal(t, 1, b.Stats().Remaps)
	assert.True(t, b.Stale(d))
	assert.EqualValues(t, 1, b.Generation())
	require.NoError(t, d.Close())

	d, err = b.ExportDmaBuf()
	require.NoError(t, err)
	assert.False(t, b.Stale(d))
	assert.EqualValues(t, 1, d.Generation)
	require.NoError(t, b.Close())
	assert.True(t, b.Stale(d), "closed")
	require.NoError(t, d.Close())
	_, err = b.ExportDmaBuf()
	require.ErrorIs(t, err, vmm.ErrClosed)
	_, err = b.ExportDmaBufRange(0, 2*mib)
	require.ErrorIs(t, err, vmm.ErrClosed)
	require.True(t, s.Stats().Clean())
}

// A buffer that grew in place spans two reservations: one descriptor covers both where
// the driver takes it, and where it refuses, the error says why that may be.
func TestExportDmaBufAcrossReservations(t *testing.T) {
	s, m := newSim(t)
	b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact, Reserve: 2 * mib})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Grow(4*mib))
	require.Equal(t, 2, b.Stats().Reservations)
	d, err := b.ExportDmaBuf()
	require.NoError(t, err)
	assert.Equal(t, 2, d.Chunks)
	require.NoError(t, d.Close())

	require.NoError(t, s.FailNth(sim.OpExportDmaBuf, 1, cu.ERROR_INVALID_VALUE))
	_, err = b.ExportDmaBuf()
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	assert.ErrorContains(t, err, "the range spans 2 reservations")

	empty, err := buffer.New(m, 0, buffer.Options{})
	require.NoError(t, err)
	defer empty.Close()
	_, err = empty.ExportDmaBuf()
	require.ErrorIs(t, err, vmm.ErrInvalid)
	assert.ErrorContains(t, err, "nothing is committed")
	var nilBuf *buffer.Buffer
	_, err = nilBuf.ExportDmaBuf()
	require.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = nilBuf.ExportDmaBufRange(0, 4096)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.NoError(t, s.FailNth(sim.OpProperties, 1, cu.ERROR_UNKNOWN))
	_, err = b.ExportDmaBuf()
	require.ErrorIs(t, err, cu.ERROR_UNKNOWN)
}

// Exports run alongside each other and wait for a Grow or Shrink; nothing leaks.
func TestExportDmaBufConcurrent(t *testing.T) {
	s, m := newSim(t)
	b := threeChunks(t, s, m)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				d, err := b.ExportDmaBuf()
				if err != nil {
					errs <- err
					return
				}
				if d.Size != d.Size&^(2*mib-1) || d.Chunks == 0 {
					errs <- fmt.Errorf("export of %d bytes in %d chunks", d.Size, d.Chunks)
					return
				}
				if err := d.Close(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 50 {
		require.NoError(t, b.Grow(uint64(8+2*(i%3))*mib))
		require.NoError(t, b.Shrink(6*mib))
	}
	close(done)
	for range 3 {
		require.NoError(t, <-errs)
	}
}
