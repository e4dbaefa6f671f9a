package peer_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/peer"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

func hgx(t testing.TB) (*sim.Sim, *vmm.Manager) {
	t.Helper()
	s, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	return s, vmm.New(s)
}

func TestGrantRevoke(t *testing.T) {
	s, m := hgx(t)
	p, err := peer.New(m, 2, 3*mib)
	require.NoError(t, err)
	require.Equal(t, uint64(4*mib), p.Size())
	require.Equal(t, 2, p.Owner())
	want := bytes.Repeat([]byte("peer"), 1024)
	require.NoError(t, p.CopyIn(2, 0, want))

	// Device 5 has no access yet: its copy is refused.
	got := make([]byte, len(want))
	require.ErrorIs(t, p.CopyOut(5, got, 0), cu.ERROR_INVALID_VALUE)

	require.NoError(t, p.Grant(peer.ReadOnly, 5, 6))
	require.NoError(t, p.Grant(peer.ReadWrite, 7))
	require.Equal(t, map[int]peer.Mode{5: peer.ReadOnly, 6: peer.ReadOnly, 7: peer.ReadWrite}, p.Grants())
	f, err := p.Access(5)
	require.NoError(t, err)
	require.Equal(t, cu.MEM_ACCESS_FLAGS_PROT_READ, f)
	require.NoError(t, p.CopyOut(5, got, 0))
	require.Equal(t, want, got)
	require.ErrorIs(t, p.CopyIn(5, 0, want), cu.ERROR_INVALID_VALUE, "read-only")
	require.NoError(t, p.CopyIn(7, 4096, []byte("from 7")))

	require.NoError(t, p.Revoke(5, 7))
	f, err = p.Access(5)
	require.NoError(t, err)
	require.Equal(t, cu.MEM_ACCESS_FLAGS_PROT_NONE, f)
	require.ErrorIs(t, p.CopyOut(7, got, 0), cu.ERROR_INVALID_VALUE)
	require.Equal(t, map[int]peer.Mode{6: peer.ReadOnly}, p.Grants())

	require.ErrorIs(t, p.Grant(peer.ReadWrite, 2), peer.ErrOwner)
	require.ErrorIs(t, p.Revoke(2), peer.ErrOwner)
	require.ErrorIs(t, p.Grant(peer.ReadWrite), peer.ErrInvalid)
	require.ErrorIs(t, p.Grant(peer.Mode(9), 1), peer.ErrInvalid)
	err = p.Grant(peer.ReadWrite, 99)
	require.ErrorIs(t, err, cu.ERROR_INVALID_DEVICE)
	require.True(t, strings.HasPrefix(err.Error(), "peer: grant read-write to devices [99]: "), err.Error())
	require.ErrorIs(t, p.CopyIn(2, 4*mib-1, []byte{1, 2}), peer.ErrOutOfRange)

	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Grant(peer.ReadWrite, 1), peer.ErrClosed)
	require.True(t, s.Stats().Clean())
}

func TestNoPeerAccess(t *testing.T) {
	cfg := sim.PresetHGX8()
	cfg.Devices = cfg.Devices[:2]
	cfg.PeerAccess = [][]bool{{false, false}, {false, false}}
	s, err := sim.New(cfg)
	require.NoError(t, err)
	m := vmm.New(s)
	p, err := peer.New(m, 0, mib)
	require.NoError(t, err)
	require.ErrorIs(t, p.Grant(peer.ReadWrite, 1), peer.ErrNoPeerAccess)
	require.NoError(t, p.Revoke(1), "revoking needs no peer access")
	_, err = peer.Stripe(m, 4*mib, []int{0, 1}, peer.StripeOptions{})
	require.ErrorIs(t, err, peer.ErrNoPeerAccess)
	require.NoError(t, p.Close())
	require.True(t, s.Stats().Clean())
}

func TestStripe(t *testing.T) {
	s, m := hgx(t)
	// vectorAddMMAP's layout: one stripe per resident device.
	st, err := peer.Stripe(m, 10*mib, []int{0, 1, 2, 3}, peer.StripeOptions{Access: []int{0, 1, 2, 3, 4}})
	require.NoError(t, err)
	require.Equal(t, uint64(16*mib), st.Size())
	require.Equal(t, []peer.StripeInfo{{0, 4 * mib, 0}, {4 * mib, 4 * mib, 1}, {8 * mib, 4 * mib, 2}, {12 * mib, 4 * mib, 3}}, st.Stripes())
	for d := range 4 {
		require.Equal(t, uint64(4*mib), s.Stats().Committed[d])
	}
	data := make([]byte, 16*mib)
	for i := range data {
		data[i] = byte(i / 4096)
	}
	require.NoError(t, st.CopyIn(4, 0, data), "device 4 writes every stripe")
	got := make([]byte, len(data))
	require.NoError(t, st.CopyOut(1, got, 0))
	require.Equal(t, data, got)
	dev, err := st.DeviceAt(9 * mib)
	require.NoError(t, err)
	require.Equal(t, 2, dev)
	_, err = st.DeviceAt(16 * mib)
	require.ErrorIs(t, err, peer.ErrOutOfRange)
	require.Equal(t, 4, s.Stats().Mappings)
	require.Equal(t, 4, s.Stats().Handles, "handles are kept until Close")
	require.NoError(t, st.Close())
	require.NoError(t, st.Close())
	require.True(t, s.Stats().Clean())

	// Round-robin stripes.
	rr, err := peer.Stripe(m, 9*mib, []int{5, 6}, peer.StripeOptions{Stripe: 2 * mib})
	require.NoError(t, err)
	var devs []int
	for _, x := range rr.Stripes() {
		devs = append(devs, x.Device)
	}
	require.Equal(t, []int{5, 6, 5, 6, 5}, devs)
	require.NoError(t, rr.Close())
	require.True(t, s.Stats().Clean())
}

func TestStripeFaultInjection(t *testing.T) {
	for _, op := range []string{"Granularity", "Reserve", "Create", "Map", "Release", "SetAccess", "CanAccessPeer"} {
		for n := 1; n <= 4; n++ {
			s, m := hgx(t)
			require.NoError(t, s.FailNth(op, n, cu.ERROR_OUT_OF_MEMORY))
			st, err := peer.Stripe(m, 8*mib, []int{0, 1, 2, 3}, peer.StripeOptions{})
			s.ClearFaults()
			if err == nil {
				require.NoError(t, st.Close())
			} else {
				require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
			}
			require.True(t, s.Stats().Clean(), "%s#%d: %v %+v", op, n, err, s.Stats())
		}
	}
	for _, op := range []string{"Granularity", "Create", "Reserve", "Map", "SetAccess"} {
		s, m := hgx(t)
		require.NoError(t, s.FailNth(op, 1, cu.ERROR_OUT_OF_MEMORY))
		_, err := peer.New(m, 0, 2*mib)
		require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY, op)
		require.True(t, s.Stats().Clean(), op)
	}
	// Close retries a failed step.
	s, m := hgx(t)
	p, err := peer.New(m, 0, 2*mib)
	require.NoError(t, err)
	require.NoError(t, s.FailNth("Free", 1, cu.ERROR_INVALID_VALUE))
	require.Error(t, p.Close())
	require.NoError(t, p.Close())
	require.True(t, s.Stats().Clean())
}
