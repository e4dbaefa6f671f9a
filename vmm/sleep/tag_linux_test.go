package sleep_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/vmm/sleep"
	"github.com/cuvmm/cuvmm/vmm/sparse"
	"github.com/stretchr/testify/require"
)

// TestTagRefusesDmaBuf: pages exported in a dma-buf cannot sleep, even once the descriptor
// is closed here (it may have been handed on).
func TestTagRefusesDmaBuf(t *testing.T) {
	s, m := h200(t)
	a, err := sparse.New(m, 16*mib, sparse.Options{})
	require.NoError(t, err)
	require.NoError(t, a.Commit(0, 6*mib))
	d, err := a.ExportDmaBuf(2*mib, 2*mib)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	p := sleep.New(m, sleep.Options{})
	err = p.Tag("kv", a)
	require.ErrorIs(t, err, sleep.ErrShared)
	require.ErrorContains(t, err, "+2MiB")
	require.NoError(t, p.Close())
	require.NoError(t, a.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}
