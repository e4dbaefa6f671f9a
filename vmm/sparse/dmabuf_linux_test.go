package sparse_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sparse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExportDmaBufCommittedPages(t *testing.T) {
	s, m := newSim(t)
	a, err := sparse.New(m, 64*mib, sparse.Options{})
	require.NoError(t, err)
	require.NoError(t, a.Commit(4*mib, 6*mib)) // pages 2, 3 and 4
	require.NoError(t, a.Commit(12*mib, 1))    // page 6

	d, err := a.ExportDmaBuf(4*mib, 6*mib)
	require.NoError(t, err)
	assert.Equal(t, a.Base()+4*mib, d.Addr)
	assert.Equal(t, 3, d.Chunks)
	info, err := sim.DmaBufInfo(d.FD())
	require.NoError(t, err)
	assert.Equal(t, 3, info.Chunks)
	assert.EqualValues(t, 6*mib, info.Size)
	require.NoError(t, d.Close())

	// A range with an uncommitted page: the error names it.
	_, err = a.ExportDmaBuf(4*mib, 10*mib)
	require.ErrorIs(t, err, vmm.ErrHole)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	assert.ErrorContains(t, err, "sparse: export dma-buf 0x400000+10MiB: a hole: part of the range is not mapped: page 5 (offset 0xa00000 of the array) is not committed")
	_, err = a.ExportDmaBuf(0, 2*mib)
	assert.ErrorContains(t, err, "page 0 (offset 0x0 of the array) is not committed")
	// Alignment is checked before holes.
	_, err = a.ExportDmaBuf(1, 4096)
	require.ErrorIs(t, err, vmm.ErrMisaligned)
	_, err = a.ExportDmaBuf(60*mib, 8*mib)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	assert.EqualValues(t, 1, s.Stats().Calls["ExportDmaBuf"], "one export reached the driver")

	// Each committed range exports.
	for _, r := range a.CommittedRanges() {
		d, err := a.ExportDmaBuf(r.Offset, r.Size)
		require.NoError(t, err)
		require.NoError(t, d.Close())
	}
	require.NoError(t, s.FailNth(sim.OpProperties, 1, cu.ERROR_UNKNOWN))
	_, err = a.ExportDmaBuf(4*mib, 2*mib)
	require.ErrorIs(t, err, cu.ERROR_UNKNOWN)

	require.NoError(t, a.Close())
	_, err = a.ExportDmaBuf(4*mib, 2*mib)
	require.ErrorIs(t, err, vmm.ErrClosed)
	var nilArray *sparse.Array
	_, err = nilArray.ExportDmaBuf(0, 4096)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.True(t, s.Stats().Clean())
}
