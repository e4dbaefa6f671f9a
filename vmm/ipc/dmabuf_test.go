package ipc_test

import (
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDmaBufHeaderRoundTrip(t *testing.T) {
	h := ipc.DmaBufHeader{Addr: 0x302000000, Size: 6 << 20, Device: 3, Chunks: 3, PCIe: true, Generation: 7}
	b, err := h.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, 56)
	assert.Equal(t, "CUVMMIPC", string(b[:8]), "one kind of message, one magic")
	var got ipc.DmaBufHeader
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, h, got)

	host := ipc.DmaBufHeader{Addr: 0x1000, Size: 4096, Device: -1}
	b, err = host.MarshalBinary()
	require.NoError(t, err)
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, host, got)

	for _, bad := range []ipc.DmaBufHeader{
		{Size: 0}, {Addr: 0xfffffffffffff000, Size: 8192}, {Size: 4096, Device: -2}, {Size: 4096, Chunks: -1},
	} {
		_, err := bad.MarshalBinary()
		require.ErrorIs(t, err, ipc.ErrProtocol, "%+v", bad)
	}
	err = got.UnmarshalBinary([]byte("CUVMMIPC"))
	require.ErrorIs(t, err, ipc.ErrProtocol)
	assert.ErrorContains(t, err, "ipc: decode dma-buf header of 8 bytes: protocol error: message of 8 bytes, shorter than any")
	assert.Equal(t, host, got, "unchanged by a failed decode")
}

func TestDmaBufTransportElsewhere(t *testing.T) {
	if runtime.GOOS == "linux" {
		t.Skip("Linux passes descriptors")
	}
	require.ErrorIs(t, ipc.SendDmaBuf(nil, vmm.NewDmaBuf(-1, 0x1000, 4096)), ipc.ErrUnsupported)
	_, err := ipc.ReceiveDmaBuf(nil)
	require.ErrorIs(t, err, ipc.ErrUnsupported)
}
