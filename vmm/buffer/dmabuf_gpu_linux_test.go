//go:build gpu

package buffer_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The real driver: a buffer of three chunks (GPUDirect RDMA capable where the device can
// be, as memory for a NIC is) exported as one dma-buf of all three; the kernel's descriptor
// has the buffer's size; a part exports too; a shrink makes the whole one stale; the
// manager's walk finds the same extent; nothing leaks.
func TestGPUBufferDmaBuf(t *testing.T) {
	be := cudaOrSkip(t)
	m := vmm.New(be)
	if ok, err := m.DmaBufSupported(0); err != nil || !ok {
		t.Skipf("device 0 cannot export dma-bufs (%v, %v)", ok, err)
	}
	before := liveHandles(be)
	props := vmm.DeviceProps(0)
	if err := m.CheckProps(vmm.Props{Location: vmm.OnDevice(0), GPUDirectRDMA: true}, 0); err == nil {
		props.GPUDirectRDMA = true
	}
	b, err := buffer.New(m, 2*mib, buffer.Options{Props: &props, Policy: buffer.Exact})
	require.NoError(t, err)
	require.NoError(t, b.Grow(4*mib))
	require.NoError(t, b.Grow(6*mib))
	require.Equal(t, 3, b.Stats().Chunks)

	d, err := b.ExportDmaBuf()
	require.NoError(t, err)
	t.Logf("%v, props %+v", d, d.Props)
	logDescriptor(t, d.FD())
	end, err := unix.Seek(d.FD(), 0, unix.SEEK_END)
	require.NoError(t, err)
	assert.EqualValues(t, 6*mib, end, "the descriptor covers every chunk")
	assert.Equal(t, 3, d.Chunks)

	part, err := b.ExportDmaBufRange(2*mib, 4*mib)
	require.NoError(t, err)
	end, err = unix.Seek(part.FD(), 0, unix.SEEK_END)
	require.NoError(t, err)
	assert.EqualValues(t, 4*mib, end)
	require.NoError(t, part.Close())

	walked, err := m.ExportDmaBuf(b.Base(), 6*mib)
	require.NoError(t, err)
	assert.Equal(t, 3, walked.Chunks)
	require.NoError(t, walked.Close())

	require.NoError(t, b.Shrink(4*mib))
	assert.True(t, b.Stale(d))
	// The descriptor outlives the chunk the shrink released.
	end, err = unix.Seek(d.FD(), 0, unix.SEEK_END)
	t.Logf("after the shrink the descriptor's size is %d (%v)", end, err)
	require.NoError(t, d.Close())
	require.NoError(t, b.Close())
	require.Equal(t, before, liveHandles(be), "handles leaked")
}

// logDescriptor logs what the kernel says of a descriptor: its link and fdinfo.
func logDescriptor(t *testing.T, fd int) {
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	t.Logf("fd %d -> %q (%v)", fd, link, err)
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	t.Logf("fdinfo: %q (%v)", info, err)
}
