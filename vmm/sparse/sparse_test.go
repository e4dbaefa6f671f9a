package sparse_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sparse"
	"github.com/stretchr/testify/require"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

func newSim(t testing.TB) (*sim.Sim, *vmm.Manager) {
	t.Helper()
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	return s, vmm.New(s)
}

type leaks struct {
	Handles, Allocations, Reservations, Mappings int
	Committed                                    uint64
}

func leaksOf(s *sim.Sim) leaks {
	st := s.Stats()
	return leaks{st.Handles, st.Allocations, st.Reservations, st.Mappings, st.Committed[0]}
}

func TestCommitOnFirstUse(t *testing.T) {
	s, m := newSim(t)
	a, err := sparse.New(m, 64*gib, sparse.Options{Zero: true})
	require.NoError(t, err)
	require.Equal(t, uint64(64*gib), a.Size())
	require.Equal(t, uint64(2*mib), a.PageSize())
	require.Zero(t, s.Stats().Committed[0], "reserving costs no device memory")

	// Write straddling a page boundary far into the array: two pages get memory.
	off := int64(40*gib - 100)
	_, err = a.WriteAt([]byte(strings.Repeat("x", 200)), off)
	require.NoError(t, err)
	st := a.Stats()
	require.Equal(t, 2, st.Committed)
	require.Equal(t, uint64(4*mib), st.CommittedSize)
	require.Equal(t, uint64(4*mib), s.Stats().Committed[0])
	require.InDelta(t, 2.0/32768, st.Occupancy, 1e-12)
	require.Equal(t, []sparse.Range{{Offset: 40*gib - 2*mib, Size: 4 * mib}}, a.CommittedRanges())
	require.True(t, a.Committed(uint64(off)))
	require.False(t, a.Committed(0))

	// Reads of uncommitted pages are zero and commit nothing; zeroed pages read zero too.
	got := make([]byte, 300)
	_, err = a.ReadAt(got, off-50)
	require.NoError(t, err)
	require.Equal(t, make([]byte, 50), got[:50])
	require.Equal(t, []byte(strings.Repeat("x", 200)), got[50:250])
	require.Equal(t, make([]byte, 50), got[250:])
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, 2, a.Stats().Committed)

	// Decommit only whole pages inside the range.
	require.NoError(t, a.Decommit(uint64(off), 100))
	require.Equal(t, 2, a.Stats().Committed, "no page lies wholly inside")
	require.NoError(t, a.Decommit(40*gib-2*mib, 2*mib))
	require.Equal(t, 1, a.Stats().Committed)
	_, err = a.ReadAt(got[:100], off)
	require.NoError(t, err)
	require.Equal(t, make([]byte, 100), got[:100], "a decommitted page reads zero")

	require.NoError(t, a.Commit(0, 10*mib))
	st = a.Stats()
	require.Equal(t, 6, st.Committed)
	require.Equal(t, 6, st.Peak)
	require.Equal(t, 7, st.Commits)
	require.Equal(t, 1, st.Decommits)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	require.True(t, s.Stats().Clean())
}

func TestPageSizeAndBounds(t *testing.T) {
	_, m := newSim(t)
	a, err := sparse.New(m, 10*mib, sparse.Options{PageSize: 5 * mib})
	require.NoError(t, err)
	defer a.Close()
	require.Equal(t, uint64(6*mib), a.PageSize(), "rounded up to the granularity")
	require.Equal(t, uint64(12*mib), a.Size())
	require.ErrorIs(t, a.Commit(12*mib, 1), vmm.ErrOutOfRange)
	require.ErrorIs(t, a.Commit(0, 0), vmm.ErrOutOfRange)
	require.ErrorIs(t, a.Commit(mib, ^uint64(0)), vmm.ErrOutOfRange)
	_, err = a.WriteAt([]byte{1}, -1)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	_, err = a.ReadAt([]byte{1}, 12*mib)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	_, err = sparse.New(m, 0, sparse.Options{})
	require.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = sparse.New(nil, mib, sparse.Options{})
	require.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = sparse.New(m, ^uint64(0), sparse.Options{})
	require.Error(t, err)
	// Nil and zero Arrays fail with vmm.ErrInvalid, naming the operation.
	for _, na := range []*sparse.Array{nil, {}} {
		for op, err := range map[string]error{
			"commit":   na.Commit(0, 1),
			"decommit": na.Decommit(0, 1),
			"close":    na.Close(),
			"read":     second(na.ReadAt([]byte{1}, 0)),
			"write":    second(na.WriteAt([]byte{1}, 0)),
		} {
			require.ErrorIs(t, err, vmm.ErrInvalid, op)
			require.True(t, strings.HasPrefix(err.Error(), "sparse: "+op), err.Error())
		}
		require.Zero(t, na.Stats())
		require.Zero(t, na.Base())
		require.Zero(t, na.Size())
		require.False(t, na.Committed(0))
		require.Empty(t, na.CommittedRanges())
	}
	err = a.Commit(12*mib, 1)
	require.True(t, strings.HasPrefix(err.Error(), "sparse: commit 0xc00000+1B: out of range"), err.Error())
}

// Every driver call of a commit and of a decommit fails in turn: the array is unchanged,
// holds its data, and the sim holds what it held before.
func TestFaultInjectionRollsBack(t *testing.T) {
	ops := []sim.Op{sim.OpCreate, sim.OpMap, sim.OpSetAccess, sim.OpMemsetD8, sim.OpUnmap, sim.OpRelease}
	type step struct {
		name string
		op   func(a *sparse.Array) error
	}
	steps := []step{
		{"commit", func(a *sparse.Array) error { return a.Commit(4*mib, 8*mib) }}, // pages 2,3 new, 4,5 new (6 committed)
		{"decommit", func(a *sparse.Array) error { return a.Decommit(0, 16*mib) }},
	}
	setup := func(t *testing.T) (*sim.Sim, *sparse.Array, []byte) {
		s, m := newSim(t)
		a, err := sparse.New(m, 64*mib, sparse.Options{Zero: true})
		require.NoError(t, err)
		data := bytes.Repeat([]byte("sparse!"), 300)
		for _, off := range []int64{0, 2 * mib, 12 * mib, 14 * mib} {
			_, err := a.WriteAt(data, off)
			require.NoError(t, err)
		}
		return s, a, data
	}
	for _, st := range steps {
		for _, op := range ops {
			for n := 1; n <= 4; n++ {
				t.Run(fmt.Sprintf("%s/%s#%d", st.name, op, n), func(t *testing.T) {
					s, a, data := setup(t)
					before, lk, ranges := a.Stats(), leaksOf(s), a.CommittedRanges()
					require.NoError(t, s.FailNth(op, n, cu.ERROR_INVALID_VALUE))
					err := st.op(a)
					s.ClearFaults()
					if err != nil {
						require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
						require.Equal(t, ranges, a.CommittedRanges())
						require.Equal(t, before.Committed, a.Stats().Committed)
						require.Equal(t, lk, leaksOf(s))
						require.Zero(t, a.Stats().Pending)
						got := make([]byte, len(data))
						for _, off := range []int64{0, 2 * mib, 12 * mib, 14 * mib} {
							_, err := a.ReadAt(got, off)
							require.NoError(t, err)
							require.Equal(t, data, got)
						}
					}
					require.NoError(t, a.Close())
					require.True(t, s.Stats().Clean(), "%+v", s.Stats())
				})
			}
		}
	}
}

func TestConcurrent(t *testing.T) {
	_, m := newSim(t)
	a, err := sparse.New(m, 256*mib, sparse.Options{})
	require.NoError(t, err)
	defer a.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			off := int64(w) * 32 * mib
			p := []byte(fmt.Sprintf("worker %d", w))
			for range 20 {
				if _, err := a.WriteAt(p, off); err != nil {
					t.Error(err)
					return
				}
				got := make([]byte, len(p))
				if _, err := a.ReadAt(got, off); err != nil || !bytes.Equal(p, got) {
					t.Errorf("worker %d: %v %q", w, err, got)
					return
				}
				if err := a.Decommit(uint64(off), 2*mib); err != nil {
					t.Error(err)
					return
				}
				_ = a.Stats()
			}
		})
	}
	wg.Wait()
}

func second(_ int, err error) error { return err }

// Close unmaps every page in one call, frees the reservation and releases the pages; what
// the driver refuses is retried by the next Close.
func TestFaultInjectionClose(t *testing.T) {
	for _, op := range []sim.Op{sim.OpUnmap, sim.OpFree, sim.OpRelease} {
		s, m := newSim(t)
		a, err := sparse.New(m, 64*mib, sparse.Options{})
		require.NoError(t, err)
		for _, off := range []uint64{0, 2 * mib, 10 * mib} {
			require.NoError(t, a.Commit(off, 1))
		}
		before := s.Stats().Calls
		for n := 1; n <= 10; n++ {
			require.NoError(t, s.FailNth(op, n, cu.ERROR_INVALID_VALUE))
		}
		err = a.Close()
		require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE, op)
		require.True(t, strings.HasPrefix(err.Error(), "sparse: close: "), err.Error())
		require.Positive(t, a.Stats().Pending)
		s.ClearFaults()
		require.NoError(t, a.Close(), "a later Close retries what failed")
		require.NoError(t, a.Close())
		require.Zero(t, a.Stats().Pending)
		require.True(t, s.Stats().Clean(), "%s: %+v", op, s.Stats())
		if op == sim.OpFree {
			require.Equal(t, uint64(1), s.Stats().Calls["Unmap"]-before["Unmap"], "one unmap over the whole array")
		}
	}
	_, err := sparse.New(nil, mib, sparse.Options{})
	require.ErrorIs(t, err, vmm.ErrInvalid)
}

// What the device lacks fails New before anything is reserved.
func TestUnsupportedUpFront(t *testing.T) {
	s, err := sim.New(sim.PresetWorkstation())
	require.NoError(t, err)
	_, err = sparse.New(vmm.New(s), 64*mib, sparse.Options{Props: &vmm.Props{Location: vmm.OnDevice(0), GPUDirectRDMA: true}})
	require.ErrorIs(t, err, vmm.ErrUnsupported)
	require.True(t, strings.HasPrefix(err.Error(), "sparse: new 64MiB: check props device 0: "), err.Error())
	require.Zero(t, s.Stats().Calls["Reserve"])

	// Read-only peers: device 1 reads committed pages, device 2 writes them too.
	s, err = sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	a, err := sparse.New(vmm.New(s), 64*mib, sparse.Options{Access: append(vmm.ReadOnly(1), vmm.ReadWrite(2)...)})
	require.NoError(t, err)
	_, err = a.WriteAt([]byte("x"), 3*mib)
	require.NoError(t, err)
	for dev, want := range []cu.MemAccessFlags{cu.MEM_ACCESS_FLAGS_PROT_READWRITE, cu.MEM_ACCESS_FLAGS_PROT_READ, cu.MEM_ACCESS_FLAGS_PROT_READWRITE, cu.MEM_ACCESS_FLAGS_PROT_NONE} {
		f, err := s.GetAccess(vmm.OnDevice(dev), a.Base()+3*mib)
		require.NoError(t, err)
		require.Equal(t, want, f, "device %d", dev)
	}
	require.NoError(t, a.Close())
	require.True(t, s.Stats().Clean())
}
