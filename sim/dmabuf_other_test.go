//go:build !linux

package sim_test

import (
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dma-bufs are a Linux kernel object: elsewhere the export fails as the driver's does.
func TestDmaBufLinuxOnly(t *testing.T) {
	s, va, _ := mapped(t, sim.PresetH200(), 0)
	fd, err := s.ExportDmaBuf(va, 2*mib, 0)
	require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED)
	assert.Equal(t, -1, fd)
	assert.ErrorContains(t, err, "Linux only")
	_, err = sim.DmaBufInfo(0)
	assert.ErrorContains(t, err, "Linux only")
}
