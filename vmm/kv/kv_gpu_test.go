//go:build gpu

package kv_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
	"github.com/stretchr/testify/require"
)

func cudaOrSkip(t testing.TB) *vmm.Manager {
	t.Helper()
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	return vmm.New(b)
}

// BenchmarkGPUCommitPageIndex is the cost of committing one 2 MiB page index across the 64
// planes, synchronously (64 creates, 64 maps, 64 set-access calls), one slot after another.
func BenchmarkGPUCommitPageIndex(b *testing.B) {
	m := cudaOrSkip(b)
	c, err := kv.New(m, llama3, kv.Options{})
	require.NoError(b, err)
	defer c.Close()
	b.ResetTimer()
	for i := range b.N {
		slot := i % llama3.Slots
		if slot == 0 && i > 0 {
			b.StopTimer()
			for s := range llama3.Slots {
				c.Release(s)
			}
			require.NoError(b, c.Trim())
			b.StartTimer()
		}
		require.NoError(b, c.Ensure(slot, 1))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page-index")
}

// BenchmarkGPUReplay is the replay (see replay) on the GPU.
func BenchmarkGPUReplay(b *testing.B) { replayBench(b, cudaOrSkip(b)) }

// TestGPUCache: a page index committed across 64 planes holds what each plane's tensor
// writes; trimming and closing give every page back (live handles before and after).
func TestGPUCache(t *testing.T) {
	m := cudaOrSkip(t)
	handles, _ := cu.LiveHandles()
	free0, _, err := m.MemInfo(0)
	require.NoError(t, err)
	c, err := kv.New(m, llama3, kv.Options{Ahead: 1})
	require.NoError(t, err)
	require.NoError(t, c.Ready())
	require.NoError(t, c.Ensure(5, 3000)) // 3 pages
	for i := range llama3.Planes {
		addr := c.Plane(i) + cu.DevicePtr(5*c.SlotBytes())
		want := pattern.Bytes(byte(i), 3000*2048)
		require.NoError(t, m.WriteAt(0, want, addr))
		got := make([]byte, len(want))
		require.NoError(t, m.ReadAt(0, got, addr))
		require.True(t, bytes.Equal(want, got), "plane %d", i)
	}
	c.Release(5)
	require.NoError(t, c.Close())
	free1, _, err := m.MemInfo(0)
	require.NoError(t, err)
	require.Equal(t, free0, free1, "every page given back")
	after, _ := cu.LiveHandles()
	require.Equal(t, handles, after)
}
