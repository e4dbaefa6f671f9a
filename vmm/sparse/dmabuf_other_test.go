//go:build !linux

package sparse_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sparse"
	"github.com/stretchr/testify/require"
)

func TestExportDmaBufLinuxOnly(t *testing.T) {
	_, m := newSim(t)
	a, err := sparse.New(m, 4*mib, sparse.Options{})
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, a.Commit(0, 2*mib))
	_, err = a.ExportDmaBuf(0, 2*mib)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
}
