//go:build gpu

package peer_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/peer"
	"github.com/stretchr/testify/require"
)

func cudaOrSkip(t testing.TB) (vmm.Backend, int) {
	t.Helper()
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	n, err := b.DeviceCount()
	if err != nil || n == 0 {
		t.Skipf("no CUDA device (%d, %v)", n, err)
	}
	return b, n
}

// Striping and peer access over every device of the machine (one device: the stripes all
// live on it and only the owner's own access is exercised).
func TestGPUPeer(t *testing.T) {
	be, n := cudaOrSkip(t)
	m := vmm.New(be)
	devs := make([]int, n)
	for i := range devs {
		devs[i] = i
	}
	st, err := peer.Stripe(m, uint64(n)*8*mib, devs, peer.StripeOptions{})
	require.NoError(t, err)
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, int(st.Size()/7))
	_, err = st.WriteAt(data, 0)
	require.NoError(t, err)
	for _, d := range devs {
		got := make([]byte, len(data))
		_, err := st.From(d).ReadAt(got, 0)
		require.NoError(t, err)
		require.Equal(t, data, got, "read from device %d", d)
	}
	t.Logf("stripes: %+v", st.Stripes())
	require.NoError(t, st.Close())

	p, err := peer.New(m, 0, 2*mib)
	require.NoError(t, err)
	defer p.Close()
	_, err = p.WriteAt([]byte("owner"), 0)
	require.NoError(t, err)
	if n < 2 {
		t.Log("one device: grants to peers not exercised")
		return
	}
	if err := p.Grant(peer.ReadOnly, 1); errors.Is(err, peer.ErrNoPeerAccess) {
		t.Skipf("device 1 cannot access device 0: %v", err)
	} else {
		require.NoError(t, err)
	}
	got := make([]byte, 5)
	_, err = p.From(1).ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, "owner", string(got))
	_, err = p.From(1).WriteAt([]byte("x"), 0)
	require.Error(t, err, "read-only")
	require.NoError(t, p.Revoke(1))
	_, err = p.From(1).ReadAt(got, 0)
	require.Error(t, err, "revoked")
}
