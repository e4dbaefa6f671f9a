package peer_test

import (
	"bytes"
	"strings"
	"sync"
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
	n, err := p.WriteAt(want, 0)
	require.NoError(t, err)
	require.Equal(t, len(want), n)

	// Device 5 has no access yet: its copy is refused.
	got := make([]byte, len(want))
	n, err = p.From(5).ReadAt(got, 0)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	require.Zero(t, n)

	require.NoError(t, p.Grant(peer.ReadOnly, 5, 6))
	require.NoError(t, p.Grant(peer.ReadWrite, 7))
	require.Equal(t, map[int]peer.Mode{5: peer.ReadOnly, 6: peer.ReadOnly, 7: peer.ReadWrite}, p.Grants())
	f, err := p.Access(5)
	require.NoError(t, err)
	require.Equal(t, cu.MEM_ACCESS_FLAGS_PROT_READ, f)
	_, err = p.From(5).ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = p.From(5).WriteAt(want, 0)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE, "read-only")
	_, err = p.From(7).WriteAt([]byte("from 7"), 4096)
	require.NoError(t, err)
	_, err = p.ReadAt(got[:6], 4096)
	require.NoError(t, err)
	require.Equal(t, "from 7", string(got[:6]), "the owner sees device 7's write")

	require.NoError(t, p.Revoke(5, 7))
	f, err = p.Access(5)
	require.NoError(t, err)
	require.Equal(t, cu.MEM_ACCESS_FLAGS_PROT_NONE, f)
	_, err = p.From(7).ReadAt(got, 0)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	require.Equal(t, map[int]peer.Mode{6: peer.ReadOnly}, p.Grants())

	require.ErrorIs(t, p.Grant(peer.ReadWrite, 2), peer.ErrOwner)
	require.ErrorIs(t, p.Revoke(2), peer.ErrOwner)
	require.ErrorIs(t, p.Grant(peer.ReadWrite), vmm.ErrInvalid)
	require.ErrorIs(t, p.Grant(peer.Mode(9), 1), vmm.ErrInvalid)
	err = p.Grant(peer.ReadWrite, 99)
	require.ErrorIs(t, err, cu.ERROR_INVALID_DEVICE)
	require.True(t, strings.HasPrefix(err.Error(), "peer: grant read-write to devices [99]: "), err.Error())
	_, err = p.WriteAt([]byte{1, 2}, 4*mib-1)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	_, err = p.ReadAt([]byte{1}, -1)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	n, err = p.ReadAt(nil, 4*mib)
	require.NoError(t, err, "an empty read at the end")
	require.Zero(t, n)

	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Grant(peer.ReadWrite, 1), vmm.ErrClosed)
	_, err = p.ReadAt(got, 0)
	require.ErrorIs(t, err, vmm.ErrClosed)
	_, err = p.ReadAt(nil, 0)
	require.ErrorIs(t, err, vmm.ErrClosed, "also a copy of nothing")
	_, err = p.Access(5)
	require.ErrorIs(t, err, vmm.ErrClosed)
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
	n, err := st.From(4).WriteAt(data, 0)
	require.NoError(t, err, "device 4 writes every stripe")
	require.Equal(t, len(data), n)
	got := make([]byte, len(data))
	_, err = st.From(1).ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, data, got)
	// From the first device granted access, across a stripe boundary.
	clear(got)
	n, err = st.ReadAt(got[:2*mib], 3*mib)
	require.NoError(t, err)
	require.Equal(t, 2*mib, n)
	require.Equal(t, data[3*mib:5*mib], got[:2*mib])
	_, err = st.From(5).ReadAt(got[:1], 0)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE, "device 5 was not granted access")
	_, err = st.WriteAt(got[:2], int64(st.Size())-1)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	dev, err := st.DeviceAt(9 * mib)
	require.NoError(t, err)
	require.Equal(t, 2, dev)
	_, err = st.DeviceAt(16 * mib)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	require.Equal(t, 4, s.Stats().Mappings)
	require.Equal(t, 4, s.Stats().Handles, "handles are kept until Close")
	require.NoError(t, st.Close())
	require.NoError(t, st.Close())
	require.True(t, s.Stats().Clean())
	_, err = st.ReadAt(got[:1], 0)
	require.ErrorIs(t, err, vmm.ErrClosed)

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
	for _, op := range []sim.Op{sim.OpGranularity, sim.OpReserve, sim.OpCreate, sim.OpMap, sim.OpRelease, sim.OpSetAccess, sim.OpCanAccessPeer} {
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
	for _, op := range []sim.Op{sim.OpGranularity, sim.OpCreate, sim.OpReserve, sim.OpMap, sim.OpSetAccess} {
		s, m := hgx(t)
		require.NoError(t, s.FailNth(op, 1, cu.ERROR_OUT_OF_MEMORY))
		_, err := peer.New(m, 0, 2*mib)
		require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY, op)
		require.True(t, s.Stats().Clean(), op)
	}
	// A copy that fails midway says how much it copied: one copy per stripe.
	s, m := hgx(t)
	st, err := peer.Stripe(m, 8*mib, []int{0, 1}, peer.StripeOptions{Stripe: 2 * mib})
	require.NoError(t, err)
	require.NoError(t, s.FailNth(sim.OpCopyDtoH, 2, cu.ERROR_OUT_OF_MEMORY))
	n, err := st.ReadAt(make([]byte, 4*mib), mib)
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	require.Equal(t, mib, n)
	require.NoError(t, st.Close())
	require.True(t, s.Stats().Clean())

	// Close retries a failed step.
	s, m = hgx(t)
	p, err := peer.New(m, 0, 2*mib)
	require.NoError(t, err)
	require.NoError(t, s.FailNth(sim.OpFree, 1, cu.ERROR_INVALID_VALUE))
	require.Error(t, p.Close())
	require.NoError(t, p.Close())
	require.True(t, s.Stats().Clean())
}

// Nil and zero values fail with vmm.ErrInvalid naming the operation instead of panicking.
func TestNilAndZero(t *testing.T) {
	check := func(err error, op string) {
		t.Helper()
		require.ErrorIs(t, err, vmm.ErrInvalid, op)
		var ve *vmm.Error
		require.ErrorAs(t, err, &ve)
		pkg := "peer"
		if op == "read" || op == "write" {
			pkg = "" // a vmm.View's
		}
		require.Equal(t, pkg, ve.Pkg)
		require.Equal(t, op, ve.Op)
	}
	buf := make([]byte, 4)
	for _, p := range []*peer.Memory{nil, {}} {
		require.Zero(t, p.Base())
		require.Zero(t, p.Size())
		require.Equal(t, -1, p.Owner())
		require.Zero(t, p.Handle())
		require.Nil(t, p.Grants())
		check(p.Grant(peer.ReadWrite, 1), "grant")
		check(p.Revoke(1), "revoke")
		_, err := p.Access(1)
		check(err, "get access")
		_, err = p.ReadAt(buf, 0)
		check(err, "read")
		_, err = p.WriteAt(buf, 0)
		check(err, "write")
		_, err = p.From(1).ReadAt(buf, 0)
		check(err, "read")
		check(p.Close(), "close")
	}
	for _, s := range []*peer.Striped{nil, {}} {
		require.Zero(t, s.Base())
		require.Zero(t, s.Size())
		require.Nil(t, s.Stripes())
		_, err := s.DeviceAt(0)
		check(err, "device at")
		_, err = s.ReadAt(buf, 0)
		check(err, "read")
		_, err = s.From(0).WriteAt(buf, 0)
		check(err, "write")
		check(s.Close(), "close")
	}
	_, err := peer.New(nil, 0, mib)
	check(err, "new")
	_, err = peer.Stripe(nil, mib, []int{0}, peer.StripeOptions{})
	check(err, "stripe")
	_, m := hgx(t)
	_, err = peer.New(m, 0, 0)
	check(err, "new")
	_, err = peer.New(m, 0, 1<<64-1)
	require.ErrorIs(t, err, vmm.ErrTooLarge)
	_, err = peer.Stripe(m, 1<<64-1, []int{0, 1}, peer.StripeOptions{Stripe: 2 * mib})
	require.ErrorIs(t, err, vmm.ErrTooLarge)
}

// Copies pin the memory without a lock: they run alongside each other and alongside Close,
// which waits for those in flight; the others fail with vmm.ErrClosed.
func TestCopiesDuringClose(t *testing.T) {
	s, m := hgx(t)
	p, err := peer.New(m, 0, 2*mib)
	require.NoError(t, err)
	require.NoError(t, p.Grant(peer.ReadWrite, 1))
	st, err := peer.Stripe(m, 8*mib, []int{2, 3}, peer.StripeOptions{Stripe: 2 * mib})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for {
				_, perr := p.From(i%2).WriteAt(buf, int64(i)*4096)
				_, serr := st.ReadAt(buf, int64(i)*mib)
				for _, err := range []error{perr, serr} {
					if err != nil {
						require.ErrorIs(t, err, vmm.ErrClosed)
					}
				}
				if perr != nil && serr != nil {
					return
				}
			}
		}()
	}
	require.NoError(t, p.Close())
	require.NoError(t, st.Close())
	wg.Wait()
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}
