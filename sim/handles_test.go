package sim

import (
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/stretchr/testify/require"
)

// TestHandleValuesFromManyGoroutines makes and releases handles from several goroutines at
// once: no value repeats, and each is a valid-looking value below the bound the fuzz
// harness's foreign Sim relies on (values grow with the handles made).
func TestHandleValuesFromManyGoroutines(t *testing.T) {
	s, err := New(PresetH200())
	require.NoError(t, err)
	prop := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED,
		Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}}
	const goroutines, each = 8, 1000
	values := make([][]cu.MemHandle, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				v, err := s.Create(2*mib, &prop, 0)
				if err != nil {
					t.Error(err)
					return
				}
				values[g] = append(values[g], v)
				if len(values[g])%3 == 0 {
					if err := s.Release(v); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	seen := map[cu.MemHandle]bool{}
	bound := cu.MemHandle(handleBase + goroutines*each*handleStride)
	for _, vs := range values {
		for i, v := range vs {
			require.False(t, seen[v], "value %v handed out twice", v)
			seen[v] = true
			require.Zero(t, v%handleStride)
			require.GreaterOrEqual(t, v, cu.MemHandle(handleBase))
			require.Less(t, v, bound)
			if (i+1)%3 != 0 {
				require.NoError(t, s.Release(v))
			}
		}
	}
	require.Len(t, seen, goroutines*each)
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}
