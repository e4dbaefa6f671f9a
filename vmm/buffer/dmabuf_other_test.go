//go:build !linux

package buffer_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/stretchr/testify/require"
)

func TestExportDmaBufLinuxOnly(t *testing.T) {
	_, m := newSim(t)
	b, err := buffer.New(m, 2*mib, buffer.Options{})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.ExportDmaBuf()
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	_, err = b.ExportDmaBufRange(0, 2*mib)
	require.ErrorIs(t, err, vmm.ErrUnsupported)
}
