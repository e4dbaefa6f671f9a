//go:build gpu

package buffer_test

import (
	"errors"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
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

func liveHandles(b vmm.Backend) int {
	if lc, ok := b.(interface{ LiveHandles() int }); ok {
		return lc.LiveHandles()
	}
	return -1
}

// The real driver: growth across reservation extensions (a chunk straddling two
// reservations, one access call over both), a refused hint forcing a remap, shrink, and
// no handle left behind.
func TestGPUBuffer(t *testing.T) {
	be := cudaOrSkip(t)
	m := vmm.New(be)
	before := liveHandles(be)
	for _, policy := range []buffer.Policy{buffer.Exact, buffer.Geometric} {
		t.Run(policy.String(), func(t *testing.T) {
			b, err := buffer.New(m, 2*mib, buffer.Options{Policy: policy, Reserve: 6 * mib})
			require.NoError(t, err)
			defer func() { require.NoError(t, b.Close()) }()
			base := b.Base()
			var want []byte
			for i := range 12 {
				size := uint64(len(want)) + 3*mib
				require.NoError(t, b.Grow(size))
				p := vmmtest.Pattern(byte(i), int(size)-len(want))
				_, err := b.WriteAt(p, int64(len(want)))
				require.NoError(t, err)
				want = append(want, p...)
				requireData(t, b, want)
			}
			st := b.Stats()
			t.Logf("%v: %+v (base %v -> %v)", policy, st, base, b.Base())
			if st.Remaps == 0 {
				require.Equal(t, base, b.Base())
			}

			// Take the addresses after the buffer so that the next extension is refused.
			at := b.Base() + cu.DevicePtr(st.Reserved)
			blocker, err := be.Reserve(2*mib, 0, at, 0)
			require.NoError(t, err)
			defer func() { require.NoError(t, be.Free(blocker, 2*mib)) }()
			t.Logf("blocker at %v (asked %v)", blocker, at)
			require.NoError(t, b.Grow(st.Reserved+mib))
			st2 := b.Stats()
			t.Logf("after blocked growth: %+v", st2)
			if blocker == at {
				require.Equal(t, st.Remaps+1, st2.Remaps, "the buffer moved")
			}
			requireData(t, b, want)

			require.NoError(t, b.Shrink(5*mib))
			requireData(t, b, want[:5*mib])
			require.NoError(t, b.Grow(40*mib))
			requireData(t, b, want[:5*mib])
		})
	}
	require.Equal(t, before, liveHandles(be), "handles leaked")
}

func TestGPUBufferFixedBase(t *testing.T) {
	be := cudaOrSkip(t)
	b, err := buffer.New(vmm.New(be), 2*mib, buffer.Options{Reserve: 2 * mib, FixedBase: true})
	require.NoError(t, err)
	defer b.Close()
	at := b.Base() + 2*mib
	blocker, err := be.Reserve(2*mib, 0, at, 0)
	require.NoError(t, err)
	defer be.Free(blocker, 2*mib)
	if blocker != at {
		t.Skipf("the driver placed the blocker at %v, not %v", blocker, at)
	}
	base := b.Base()
	require.ErrorIs(t, b.Grow(4*mib), vmm.ErrWouldMove)
	require.Equal(t, base, b.Base())
	require.Equal(t, uint64(2*mib), b.Stats().Committed)
}

// The real driver: chunks committed after SetConfig are GPUDirect RDMA capable where the
// device says it can be (otherwise SetConfig fails up front), and an owner with read-only
// access reads the buffer and cannot write it.
func TestGPUBufferSetConfig(t *testing.T) {
	be := cudaOrSkip(t)
	m := vmm.New(be)
	b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close()) }()
	rdma, err := m.Attribute(0, cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)
	require.NoError(t, err)
	err = b.SetConfig(buffer.Config{Props: vmm.Props{GPUDirectRDMA: true}, Access: vmm.ReadOnly(0)})
	if rdma == 0 {
		require.ErrorIs(t, err, vmm.ErrUnsupported)
		t.Skip("no GPUDirect RDMA with VMM on device 0")
	}
	require.NoError(t, err)
	require.NoError(t, b.Grow(4*mib))
	chunks := b.Chunks()
	require.Len(t, chunks, 2)
	p, err := chunks[1].Allocation.Properties()
	require.NoError(t, err)
	require.Equal(t, uint8(1), p.GPUDirectRDMACapable)
	_, err = b.WriteAt([]byte{1}, 0)
	require.NoError(t, err, "the first chunk is read-write")
	_, err = b.WriteAt([]byte{1}, 2*mib)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE, "the second is read-only (recorded: dangerous/read-only-htod)")
	_, err = b.ReadAt(make([]byte, 16), 2*mib)
	require.NoError(t, err)
}
