//go:build gpu

package ipc_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The real driver: a buffer of three chunks exported as one dma-buf, sent to a process that
// drives no GPU, which receives a kernel dma-buf of the whole buffer (its size checked by
// lseek in ReceiveDmaBuf).
func TestGPUDmaBufCrossProcess(t *testing.T) {
	be, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	m := vmm.New(be)
	if ok, err := m.DmaBufSupported(0); err != nil || !ok {
		t.Skipf("device 0 cannot export dma-bufs (%v, %v)", ok, err)
	}
	// GPUDirect RDMA capable where the device can make it so, as memory for a NIC is.
	props := vmm.Props{Location: vmm.OnDevice(0), GPUDirectRDMA: true}
	if m.CheckProps(props, 0) != nil {
		props.GPUDirectRDMA = false
	}
	b := dmaBufBuffer(t, m, props)
	defer b.Close()
	// The driver opens descriptors of its own on a process's first dma-buf export (about
	// 20 on an H200, driver 580) and keeps them: one export first, so that the count the
	// cross-process run compares before and after sees only what the test made.
	warm, err := b.ExportDmaBuf()
	require.NoError(t, err)
	require.NoError(t, warm.Close())
	got := dmaBufCrossProcess(t, b, "cuda")
	t.Logf("the child received: %s", got)
	assert.Contains(t, got, fmt.Sprintf("%v+%d device 0 chunks 3; ", b.Base(), 6*mib))
	assert.Contains(t, got, "dmabuf", "a kernel dma-buf")
}
