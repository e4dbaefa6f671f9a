//go:build gpu

package sparse_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sparse"
	"github.com/stretchr/testify/require"
)

func cudaOrSkip(t testing.TB) vmm.Backend {
	t.Helper()
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	if n, err := b.DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device (%d, %v)", n, err)
	}
	return b
}

func TestGPUSparse(t *testing.T) {
	be := cudaOrSkip(t)
	lc, _ := be.(interface{ LiveHandles() int })
	before := -1
	if lc != nil {
		before = lc.LiveHandles()
	}
	a, err := sparse.New(vmm.New(be), 1<<40, sparse.Options{Zero: true})
	require.NoError(t, err)
	data := bytes.Repeat([]byte("sparse on the GPU "), 1<<16) // ~1.1 MiB
	offs := []int64{0, 3<<30 - 4096, 512 << 30, 1<<40 - int64(len(data))}
	for _, off := range offs {
		_, err := a.WriteAt(data, off)
		require.NoError(t, err)
	}
	got := make([]byte, len(data))
	for _, off := range offs {
		_, err := a.ReadAt(got, off)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
	st := a.Stats()
	t.Logf("%+v", st)
	require.Equal(t, 5, st.Committed) // 1 + 2 (straddling) + 1 + 1
	// A fresh page around a written one reads zero (Options.Zero).
	_, err = a.ReadAt(got[:4096], 512<<30+int64(len(data)))
	require.NoError(t, err)
	require.Equal(t, make([]byte, 4096), got[:4096])
	require.NoError(t, a.Decommit(0, 1<<40))
	require.Zero(t, a.Stats().Committed)
	require.NoError(t, a.Close())
	if lc != nil {
		require.Equal(t, before, lc.LiveHandles())
	}
}
