//go:build !linux

package vmm_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dma-bufs are a Linux kernel object: elsewhere every export fails before the driver is
// asked, and no device supports them.
func TestDmaBufLinuxOnly(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	r, err := m.Reserve(2 * mib)
	require.NoError(t, err)
	defer r.Close()
	ok, err := m.DmaBufSupported(0)
	require.NoError(t, err)
	assert.False(t, ok)
	for _, export := range []func() (*vmm.DmaBuf, error){
		func() (*vmm.DmaBuf, error) { return r.ExportDmaBuf(0, 2*mib) },
		func() (*vmm.DmaBuf, error) { return m.ExportDmaBuf(r.Base(), 2*mib) },
		func() (*vmm.DmaBuf, error) { return m.ExportDmaBufChunks(r.Base(), 2*mib, nil) },
	} {
		d, err := export()
		assert.Nil(t, d)
		require.ErrorIs(t, err, vmm.ErrUnsupported)
		require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED)
		assert.ErrorContains(t, err, "dma-buf descriptors are Linux only")
	}
	assert.Zero(t, s.Stats().Calls["ExportDmaBuf"])
}
