package sim

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/stretchr/testify/require"
)

// TestHandleValuesFromManyGoroutines makes and releases handles from several goroutines at
// once: no value repeats, each is a valid-looking value in the shard its number says, and
// the values stay below the bound the fuzz harness's foreign Sim relies on (they grow with
// the handles made, by at most a block per shard more).
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
	bound := cu.MemHandle(handleBase + (goroutines*each+handleShards*handleBlock)*handleShards*handleStride)
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

// TestStripedLayout: the structures goroutines on different cores write, each its own, are
// whole multiples of a cache line pair, so that none shares one with its neighbour.
func TestStripedLayout(t *testing.T) {
	require.Equal(t, uintptr(128), unsafe.Sizeof(handleShard{}))
	require.Zero(t, unsafe.Sizeof(resv{})%128, "resv is %d bytes", unsafe.Sizeof(resv{}))
	require.Equal(t, uintptr(64), unsafe.Sizeof(budget{}.stripes[0]))
	require.Equal(t, uintptr(64), unsafe.Sizeof(counter{}.stripes[0]))
}
