package main

import (
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
)

// CUDA 13.1's multicast binds are optional: a 13.0 driver lacks them and still has every
// multicast call cuvmm needs.
func TestOptionalSymbolsNotCounted(t *testing.T) {
	require.Equal(t, "", symbolKind(loader.Symbol{Name: "cuMulticastBindMem_v2", Version: 13010}))
	require.Equal(t, "multicast", symbolKind(loader.Symbol{Name: "cuMulticastBindMem", Version: 12010}))
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	r := symbolsOf(s)
	require.True(t, r.Multicast.complete(), "%+v", r.Multicast.Missing)
	require.NotContains(t, r.Multicast.Resolved, "cuMulticastBindMem_v2")
}
