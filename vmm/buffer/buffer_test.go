package buffer_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/vmmtest"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

func newSim(t testing.TB) (*sim.Sim, *vmm.Manager) {
	t.Helper()
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	return s, vmm.New(s)
}

// leaks is what the sim holds that a buffer could leak.
type leaks struct {
	Handles, Allocations, Reservations, Mappings int
	Committed                                    uint64
}

func leaksOf(s *sim.Sim) leaks {
	st := s.Stats()
	return leaks{st.Handles, st.Allocations, st.Reservations, st.Mappings, st.Committed[0]}
}

// requireData checks that the buffer holds want at offset 0.
func requireData(t *testing.T, b *buffer.Buffer, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	n, err := b.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	if !bytes.Equal(want, got) {
		i := 0
		for i < len(want) && want[i] == got[i] {
			i++
		}
		t.Fatalf("data differs from byte %d of %d", i, len(want))
	}
}

func TestGrowKeepsBaseAndData(t *testing.T) {
	for _, policy := range []buffer.Policy{buffer.Geometric, buffer.Exact} {
		t.Run(policy.String(), func(t *testing.T) {
			s, m := newSim(t)
			// A small reservation, so that growth has to extend it (the sim honours the hint
			// when the range after it is free, as the H100 did).
			b, err := buffer.New(m, 3*mib, buffer.Options{Policy: policy, Reserve: 8 * mib})
			require.NoError(t, err)
			base := b.Base()
			require.NotZero(t, base)
			var want []byte
			for i := range 20 {
				size := uint64(len(want)) + 3*mib + uint64(i)*4096
				require.NoError(t, b.Grow(size))
				require.Equal(t, base, b.Base(), "the base never moves while the hint is honoured")
				chunk := vmmtest.Pattern(byte(i), int(size)-len(want))
				_, err := b.WriteAt(chunk, int64(len(want)))
				require.NoError(t, err)
				want = append(want, chunk...)
				requireData(t, b, want)
			}
			st := b.Stats()
			require.Equal(t, uint64(len(want)), st.Size)
			require.GreaterOrEqual(t, st.Committed, st.Size)
			require.Zero(t, st.Committed%st.Granularity)
			require.Positive(t, st.Extends)
			require.Zero(t, st.Remaps)
			require.Zero(t, st.Pending)
			t.Logf("%v: %+v", policy, st)
			if policy == buffer.Geometric {
				require.Less(t, st.Chunks, 12, "geometric growth commits O(log n) chunks")
			}
			require.NoError(t, b.Close())
			require.NoError(t, b.Close(), "Close is idempotent")
			require.True(t, s.Stats().Clean(), "%+v", s.Stats())
		})
	}
}

func TestGeometricCallsAreLogarithmic(t *testing.T) {
	_, m := newSim(t)
	b, err := buffer.New(m, 0, buffer.Options{})
	require.NoError(t, err)
	defer b.Close()
	const steps = 512
	for i := 1; i <= steps; i++ {
		require.NoError(t, b.Grow(uint64(i)*mib))
	}
	st := b.Stats()
	// 512 MiB in 2 MiB granules: 1+1+2+4+...+128 granules, 9 chunks.
	require.Equal(t, 9, st.Chunks)
	require.Equal(t, 9, st.Grows)
	require.LessOrEqual(t, st.Calls, 3+3*9, "a growth inside the reservation is create+map+set access")
}

func TestExactChunks(t *testing.T) {
	_, m := newSim(t)
	b, err := buffer.New(m, 0, buffer.Options{Policy: buffer.Exact, MinChunk: 4 * mib})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Grow(1))
	require.NoError(t, b.Grow(4*mib), "inside the first chunk: nothing to commit")
	require.NoError(t, b.Grow(5*mib))
	require.NoError(t, b.Grow(20*mib))
	st := b.Stats()
	require.Equal(t, 3, st.Chunks)
	require.Equal(t, uint64(20*mib), st.Committed)
	require.Equal(t, []uint64{0, 4 * mib, 8 * mib}, offsets(b.Chunks()))
}

func offsets(cs []buffer.Chunk) []uint64 {
	var out []uint64
	for _, c := range cs {
		out = append(out, c.Offset)
	}
	return out
}

// block reserves the range right after the buffer's reservation, so that the driver cannot
// honour the buffer's hint (what was seen on an H200).
func block(t *testing.T, s *sim.Sim, b *buffer.Buffer) func() {
	t.Helper()
	st := b.Stats()
	at := b.Base() + cu.DevicePtr(st.Reserved)
	va, err := s.Reserve(2*mib, 0, at, 0)
	require.NoError(t, err)
	require.Equal(t, at, va)
	return func() { require.NoError(t, s.Free(va, 2*mib)) }
}

func TestHintRefusedRemapsWithoutCopy(t *testing.T) {
	s, m := newSim(t)
	b, err := buffer.New(m, 4*mib, buffer.Options{Reserve: 4 * mib})
	require.NoError(t, err)
	want := vmmtest.Pattern(1, 4*mib)
	_, err = b.WriteAt(want, 0)
	require.NoError(t, err)
	unblock := block(t, s, b)
	defer unblock()
	old := b.Base()
	handles := b.Chunks()

	copies := s.Stats().Calls["CopyDtoD"]
	require.NoError(t, b.Grow(10*mib))
	st := b.Stats()
	require.Equal(t, 1, st.HintsRefused)
	require.Equal(t, 1, st.Remaps)
	require.Equal(t, 1, st.Reservations)
	require.NotEqual(t, old, b.Base(), "the buffer moved")
	require.Equal(t, copies, s.Stats().Calls["CopyDtoD"], "no data copied on the device")
	require.Equal(t, handles[0], b.Chunks()[0], "the same physical chunk, remapped")
	requireData(t, b, want)
	// The old range is gone: the sim holds the buffer's reservation and the blocker.
	require.Equal(t, 2, s.Stats().Reservations)
	require.NoError(t, b.Close())
}

// A driver that ignores every hint (as the H200 did): each extension becomes a remap,
// and the data survives all of them.
func TestEveryHintIgnored(t *testing.T) {
	cfg := sim.PresetH200()
	cfg.RefuseHints = true
	s, err := sim.New(cfg)
	require.NoError(t, err)
	b, err := buffer.New(vmm.New(s), 2*mib, buffer.Options{Reserve: 2 * mib})
	require.NoError(t, err)
	want := vmmtest.Pattern(9, 2*mib)
	_, err = b.WriteAt(want, 0)
	require.NoError(t, err)
	for size := uint64(4 * mib); size <= 64*mib; size *= 2 {
		require.NoError(t, b.Grow(size))
		requireData(t, b, want)
	}
	st := b.Stats()
	require.Zero(t, st.Extends)
	require.Equal(t, st.HintsRefused, st.Remaps)
	require.Positive(t, st.Remaps)
	require.Equal(t, 1, st.Reservations)
	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

func TestFixedBaseRefusesToMove(t *testing.T) {
	s, m := newSim(t)
	b, err := buffer.New(m, 4*mib, buffer.Options{Reserve: 4 * mib, FixedBase: true})
	require.NoError(t, err)
	defer b.Close()
	unblock := block(t, s, b)
	defer unblock()
	before, lk := b.Stats(), leaksOf(s)
	err = b.Grow(6 * mib)
	require.ErrorIs(t, err, vmm.ErrWouldMove)
	require.Contains(t, err.Error(), "buffer: grow to 6MiB")
	after := b.Stats()
	require.Equal(t, before.Size, after.Size)
	require.Equal(t, before.Committed, after.Committed)
	require.Equal(t, 1, after.HintsRefused)
	require.Equal(t, lk, leaksOf(s))
}

func TestShrinkReleasesAndGrowsBackInPlace(t *testing.T) {
	s, m := newSim(t)
	b, err := buffer.New(m, 0, buffer.Options{Policy: buffer.Exact, Reserve: 4 * mib})
	require.NoError(t, err)
	var want []byte
	for i := range 5 {
		require.NoError(t, b.Grow(uint64(i+1)*2*mib))
		p := vmmtest.Pattern(byte(i), 2*mib)
		_, err := b.WriteAt(p, int64(i)*2*mib)
		require.NoError(t, err)
		want = append(want, p...)
	}
	require.Equal(t, 5, b.Stats().Chunks)
	require.Greater(t, b.Stats().Reservations, 1, "the tail lies in extensions")
	base := b.Base()
	require.NoError(t, b.Shrink(3*mib))
	st := b.Stats()
	require.Equal(t, uint64(3*mib), st.Size)
	require.Equal(t, 2, st.Chunks, "the chunk holding byte 3MiB-1 stays")
	require.Equal(t, uint64(4*mib), st.Committed)
	require.Equal(t, uint64(4*mib), s.Stats().Committed[0])
	requireData(t, b, want[:3*mib])
	require.NoError(t, b.Shrink(10*mib), "shrinking to more than the size does nothing")
	require.Equal(t, uint64(3*mib), b.Size())
	require.NoError(t, b.Grow(8*mib))
	require.Equal(t, base, b.Base())
	requireData(t, b, want[:3*mib])
	require.NoError(t, b.Shrink(0))
	require.Zero(t, b.Stats().Committed)
	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean())
}

func TestClosedAndInvalid(t *testing.T) {
	_, m := newSim(t)
	_, err := buffer.New(nil, 0, buffer.Options{})
	require.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = buffer.New(m, 0, buffer.Options{Policy: 7})
	require.ErrorIs(t, err, vmm.ErrInvalid)
	_, err = buffer.New(m, 1<<63+1, buffer.Options{})
	require.Error(t, err)
	_, err = buffer.New(m, mib, buffer.Options{Device: 5})
	require.ErrorIs(t, err, cu.ERROR_INVALID_DEVICE)
	require.True(t, strings.HasPrefix(err.Error(), "buffer: new"), err.Error())

	b, err := buffer.New(m, mib, buffer.Options{})
	require.NoError(t, err)
	_, err = b.WriteAt(make([]byte, 2), mib-1)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	_, err = b.ReadAt(make([]byte, 1), -1)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	require.ErrorIs(t, b.Grow(^uint64(0)), vmm.ErrTooLarge)
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Grow(4*mib), vmm.ErrClosed)
	require.ErrorIs(t, b.Shrink(0), vmm.ErrClosed)
	_, err = b.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, vmm.ErrClosed)
	require.Zero(t, b.Base())

	// Nil and zero Buffers fail with vmm.ErrInvalid, naming the operation.
	for _, nb := range []*buffer.Buffer{nil, {}} {
		for op, err := range map[string]error{
			"grow":       nb.Grow(1),
			"shrink":     nb.Shrink(1),
			"close":      nb.Close(),
			"set config": nb.SetConfig(buffer.Config{}),
			"read":       second(nb.ReadAt(nil, 0)),
			"write":      second(nb.WriteAt([]byte{1}, 0)),
		} {
			require.ErrorIs(t, err, vmm.ErrInvalid, op)
			require.True(t, strings.HasPrefix(err.Error(), "buffer: "+op), err.Error())
		}
		require.Zero(t, nb.Stats())
		require.Zero(t, nb.Base())
		require.Empty(t, nb.Chunks())
		require.Zero(t, nb.Config())
	}
}

func TestOutOfMemoryFallsBackToExact(t *testing.T) {
	s, m := newSim(t)
	require.NoError(t, s.SetCapacity(0, 40*mib))
	b, err := buffer.New(m, 32*mib, buffer.Options{})
	require.NoError(t, err)
	defer b.Close()
	// Geometric wants 32 MiB more; only 8 are left: the exact chunk is taken.
	require.NoError(t, b.Grow(40*mib))
	require.Equal(t, uint64(40*mib), b.Stats().Committed)
	err = b.Grow(42 * mib)
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	require.True(t, strings.HasPrefix(err.Error(), "buffer: grow to 42MiB (size 40MiB, committed 40MiB): create 2MiB on device 0: "), err.Error())
	require.Contains(t, err.Error(), "CUDA_ERROR_OUT_OF_MEMORY")
}

func TestConcurrentUse(t *testing.T) {
	_, m := newSim(t)
	b, err := buffer.New(m, 2*mib, buffer.Options{Reserve: 4 * mib})
	require.NoError(t, err)
	defer b.Close()
	head := vmmtest.Pattern(9, 4096)
	_, err = b.WriteAt(head, 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			got := make([]byte, len(head))
			for range 50 {
				_, err := b.ReadAt(got, 0)
				if err != nil || !bytes.Equal(head, got) {
					t.Errorf("reader %d: %v", w, err)
					return
				}
				_ = b.Stats()
			}
		})
	}
	wg.Go(func() {
		for i := range 40 {
			if err := b.Grow(uint64(i+2) * mib); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
}

// The fault-injection proof: every driver call that grow, shrink or close makes is failed
// in turn, and either the operation fails and the buffer is unchanged, valid and the sim
// holds what it held before, or the failure hit a release the buffer retries later, the
// operation succeeded, and Close leaves the sim clean.

type scenario struct {
	name string
	// preset is the machine (nil: an H100).
	preset func() sim.Config
	// setup builds the buffer and writes data; it returns the data.
	setup func(t *testing.T, s *sim.Sim, m *vmm.Manager) (*buffer.Buffer, []byte)
	// op is the operation under test.
	op func(b *buffer.Buffer) error
	// after checks the buffer once op succeeded.
	after func(t *testing.T, b *buffer.Buffer)
}

func fill(t *testing.T, b *buffer.Buffer, seed byte) []byte {
	t.Helper()
	want := vmmtest.Pattern(seed, int(b.Size()))
	_, err := b.WriteAt(want, 0)
	require.NoError(t, err)
	return want
}

var scenarios = []scenario{
	{
		name: "grow-inside-reservation",
		setup: func(t *testing.T, s *sim.Sim, m *vmm.Manager) (*buffer.Buffer, []byte) {
			b, err := buffer.New(m, 4*mib, buffer.Options{Reserve: 64 * mib})
			require.NoError(t, err)
			return b, fill(t, b, 1)
		},
		op:    func(b *buffer.Buffer) error { return b.Grow(9 * mib) },
		after: func(t *testing.T, b *buffer.Buffer) { require.Equal(t, uint64(9*mib), b.Size()) },
	},
	{
		name: "grow-extending-reservation",
		setup: func(t *testing.T, s *sim.Sim, m *vmm.Manager) (*buffer.Buffer, []byte) {
			b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact, Reserve: 6 * mib})
			require.NoError(t, err)
			require.NoError(t, b.Grow(4*mib))
			return b, fill(t, b, 2)
		},
		// 4 MiB committed of 6 reserved: the 6 MiB chunk straddles the end, two pieces.
		op: func(b *buffer.Buffer) error { return b.Grow(10 * mib) },
		after: func(t *testing.T, b *buffer.Buffer) {
			require.Equal(t, 1, b.Stats().Extends)
			require.Equal(t, 2, b.Stats().Reservations)
		},
	},
	{
		name: "grow-remapping",
		setup: func(t *testing.T, s *sim.Sim, m *vmm.Manager) (*buffer.Buffer, []byte) {
			b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact, Reserve: 2 * mib})
			require.NoError(t, err)
			require.NoError(t, b.Grow(6*mib)) // extended: two reservations, two chunks
			require.Equal(t, 2, b.Stats().Reservations)
			block(t, s, b) // left in place: the sim's leak counters include it throughout
			return b, fill(t, b, 3)
		},
		op: func(b *buffer.Buffer) error { return b.Grow(14 * mib) },
		after: func(t *testing.T, b *buffer.Buffer) {
			st := b.Stats()
			require.Equal(t, 1, st.Remaps)
			require.Equal(t, 1, st.Reservations)
		},
	},
	{
		name: "shrink-across-reservations",
		setup: func(t *testing.T, s *sim.Sim, m *vmm.Manager) (*buffer.Buffer, []byte) {
			b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact, Reserve: 4 * mib})
			require.NoError(t, err)
			for _, n := range []uint64{4, 6, 8, 12} {
				require.NoError(t, b.Grow(n*mib))
			}
			require.Equal(t, 3, b.Stats().Reservations)
			return b, fill(t, b, 4)
		},
		op:    func(b *buffer.Buffer) error { return b.Shrink(3 * mib) },
		after: func(t *testing.T, b *buffer.Buffer) { require.Equal(t, 2, b.Stats().Chunks) },
	},
	{
		name:   "grow-remapping-two-configs",
		preset: sim.PresetHGX8,
		setup: func(t *testing.T, s *sim.Sim, m *vmm.Manager) (*buffer.Buffer, []byte) {
			b, err := buffer.New(m, 2*mib, buffer.Options{Policy: buffer.Exact, Reserve: 4 * mib, Access: vmm.ReadWrite(1)})
			require.NoError(t, err)
			require.NoError(t, b.SetConfig(buffer.Config{Access: vmm.ReadOnly(1)}))
			require.NoError(t, b.Grow(4*mib))
			block(t, s, b)
			return b, fill(t, b, 5)
		},
		// Three chunks at the new range: access in two calls, one per configuration.
		op: func(b *buffer.Buffer) error { return b.Grow(6 * mib) },
		after: func(t *testing.T, b *buffer.Buffer) {
			require.Equal(t, 1, b.Stats().Remaps)
			require.Len(t, b.Chunks(), 3)
		},
	},
	{
		name: "new",
		setup: func(t *testing.T, s *sim.Sim, m *vmm.Manager) (*buffer.Buffer, []byte) {
			return nil, nil
		},
	},
}

var driverOps = []sim.Op{sim.OpGranularity, sim.OpReserve, sim.OpFree, sim.OpCreate, sim.OpRelease, sim.OpMap, sim.OpUnmap, sim.OpSetAccess}

func TestFaultInjectionRollsBack(t *testing.T) {
	for _, sc := range scenarios {
		if sc.op == nil {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			// Count each operation's calls in a clean run.
			s, m := sc.sim(t)
			b, _ := sc.setup(t, s, m)
			before := s.Stats().Calls
			require.NoError(t, sc.op(b))
			sc.after(t, b)
			counts := map[sim.Op]int{}
			for _, op := range driverOps {
				counts[op] = int(s.Stats().Calls[op.String()] - before[op.String()])
			}
			require.NoError(t, b.Close())
			t.Logf("driver calls: %v", counts)

			injected := 0
			for _, op := range driverOps {
				for n := 1; n <= counts[op]; n++ {
					for _, res := range []cu.Result{cu.ERROR_INVALID_VALUE, cu.ERROR_OUT_OF_MEMORY} {
						t.Run(fmt.Sprintf("%s#%d/%s", op, n, res.Name()), func(t *testing.T) {
							injected++
							checkFault(t, sc, op, n, res)
						})
					}
				}
			}
			require.Positive(t, injected)
		})
	}
}

func (sc scenario) sim(t *testing.T) (*sim.Sim, *vmm.Manager) {
	if sc.preset == nil {
		return newSim(t)
	}
	return newSimWith(t, sc.preset())
}

func checkFault(t *testing.T, sc scenario, op sim.Op, n int, res cu.Result) {
	s, m := sc.sim(t)
	b, want := sc.setup(t, s, m)
	st0, lk0, base0, chunks0 := b.Stats(), leaksOf(s), b.Base(), b.Chunks()
	require.NoError(t, s.FailNth(op, n, res))
	err := sc.op(b)
	s.ClearFaults()
	st := b.Stats()
	if err != nil {
		require.True(t, strings.HasPrefix(err.Error(), "buffer: "), err.Error())
		require.ErrorIs(t, err, res, "the driver's result is kept: %v", err)
		// Unchanged and valid.
		require.Equal(t, base0, b.Base())
		require.Equal(t, chunks0, b.Chunks())
		require.Equal(t, st0.Size, st.Size)
		require.Equal(t, st0.Committed, st.Committed)
		require.Equal(t, st0.Reserved, st.Reserved)
		require.Equal(t, st0.Reservations, st.Reservations)
		require.Zero(t, st.Pending, "every undo step succeeded")
		require.Equal(t, lk0, leaksOf(s), "nothing leaked: %v", err)
		requireData(t, b, want)
	} else {
		// The fault hit a release after the commit point (kept for retry), or the
		// geometric chunk's OOM fallback absorbed it.
		sc.after(t, b)
		requireData(t, b, want[:min(len(want), int(b.Size()))])
	}
	// Still usable: grow and write once more.
	require.NoError(t, b.Grow(b.Size()+mib))
	_, err = b.WriteAt([]byte{1}, int64(b.Size()-1))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.Zero(t, b.Stats().Pending)
	lk := leaksOf(s)
	if strings.HasPrefix(sc.name, "grow-remapping") {
		lk.Reservations-- // the blocker
	}
	require.Equal(t, leaks{}, lk, "Close releases everything, retried releases included")
}

func TestFaultInjectionNew(t *testing.T) {
	for _, op := range driverOps {
		for n := 1; n <= 4; n++ {
			s, m := newSim(t)
			require.NoError(t, s.FailNth(op, n, cu.ERROR_OUT_OF_MEMORY))
			b, err := buffer.New(m, 6*mib, buffer.Options{Policy: buffer.Exact, Reserve: 2 * mib})
			s.ClearFaults()
			if err != nil {
				require.Nil(t, b)
				require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
				require.True(t, s.Stats().Clean(), "%s#%d: %v", op, n, s.Stats())
				continue
			}
			require.NoError(t, b.Close())
			require.True(t, s.Stats().Clean(), "%s#%d", op, n)
		}
	}
}

func TestFaultInjectionClose(t *testing.T) {
	for _, op := range []sim.Op{sim.OpUnmap, sim.OpRelease, sim.OpFree} {
		s, m := newSim(t)
		b, err := buffer.New(m, 0, buffer.Options{Policy: buffer.Exact, Reserve: 2 * mib})
		require.NoError(t, err)
		for _, n := range []uint64{2, 4, 6} {
			require.NoError(t, b.Grow(n*mib))
		}
		// Fail every call of op: the first attempts and Close's immediate retry.
		for n := 1; n <= 20; n++ {
			require.NoError(t, s.FailNth(op, n, cu.ERROR_INVALID_VALUE))
		}
		err = b.Close()
		require.Error(t, err, op)
		require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
		require.Positive(t, b.Stats().Pending)
		s.ClearFaults()
		require.NoError(t, b.Close(), "a later Close retries what failed")
		require.NoError(t, b.Close())
		require.True(t, s.Stats().Clean(), "%s: %+v", op, s.Stats())
	}
}

func TestErrorNamesOperation(t *testing.T) {
	s, m := newSim(t)
	b, err := buffer.New(m, 2*mib, buffer.Options{})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, s.FailNth(sim.OpMap, 1, cu.ERROR_INVALID_VALUE))
	err = b.Grow(3 * mib)
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "buffer: grow to 3MiB (size 2MiB, committed 2MiB): map 0x"), msg)
	require.Contains(t, msg, "+2MiB: CUDA_ERROR_INVALID_VALUE")
	require.NotContains(t, msg, "vmm:", "nested errors do not name their package")
	var be *vmm.Error
	require.True(t, errors.As(err, &be))
	require.Equal(t, "buffer", be.Pkg)
	require.Equal(t, "grow", be.Op)
}

func second(_ int, err error) error { return err }

// A New that fails, and whose undo the driver refuses too, returns no Buffer to retry the
// release on: what it could not release goes to the Manager's Pending list, which the next
// Create retries.
func TestNewFailedUndoGoesToTheManager(t *testing.T) {
	s, m := newSim(t)
	require.NoError(t, s.FailNth(sim.OpMap, 1, cu.ERROR_OUT_OF_MEMORY))
	require.NoError(t, s.FailNth(sim.OpRelease, 1, cu.ERROR_UNKNOWN)) // the undo
	require.NoError(t, s.FailNth(sim.OpRelease, 2, cu.ERROR_UNKNOWN)) // Close's retry of it
	b, err := buffer.New(m, 2*mib, buffer.Options{})
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	require.Nil(t, b)
	require.Equal(t, 1, m.Pending().Len())
	require.EqualValues(t, 1, s.Stats().Handles, "the refused release holds the chunk")
	a, err := m.Create(2*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.Zero(t, m.Pending().Len())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// A geometric chunk that fails for memory falls back to the exact size; when the driver
// refused the failed chunk's unmap, that unmap is retried before the smaller chunk goes
// where the larger one was (else the fallback met the leftover mapping).
func TestGrowFallbackRetriesTheUndoFirst(t *testing.T) {
	s, m := newSim(t)
	b, err := buffer.New(m, 8*mib, buffer.Options{Reserve: 64 * mib})
	require.NoError(t, err)
	require.NoError(t, s.FailNth(sim.OpSetAccess, 1, cu.ERROR_OUT_OF_MEMORY)) // the geometric chunk
	require.NoError(t, s.FailNth(sim.OpUnmap, 1, cu.ERROR_UNKNOWN))           // its undo
	require.NoError(t, b.Grow(10*mib), "the exact chunk fits")
	require.EqualValues(t, 10*mib, b.Size())
	require.NoError(t, b.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// TestGrowReportsABreak: a geometric Grow whose chunk fails for memory while its undo fails
// too (a span not mapped back) breaks the buffer; Grow reports that, rather than falling
// back to the exact chunk and returning nil for a buffer that refuses all that follows.
func TestGrowReportsABreak(t *testing.T) {
	broken := 0
	for unmap := 1; unmap <= 6; unmap++ {
		for mapN := 1; mapN <= 12; mapN++ {
			s, m := newSim(t)
			b, err := buffer.New(m, 2*mib, buffer.Options{Reserve: 2 * mib}) // geometric
			require.NoError(t, err)
			require.NoError(t, b.Grow(4*mib)) // extended in place: two spans
			block(t, s, b)
			_ = s.FailNth(sim.OpUnmap, unmap, cu.ERROR_OUT_OF_MEMORY)
			_ = s.FailNth(sim.OpMap, mapN, cu.ERROR_UNKNOWN)
			err = b.Grow(5 * mib)
			s.ClearFaults()
			if errors.Is(err, vmm.ErrBroken) {
				broken++
			} else if err == nil {
				require.NotErrorIs(t, b.Grow(b.Size()+1), vmm.ErrBroken, "unmap %d, map %d: Grow returned nil for a broken buffer", unmap, mapN)
			}
			b.Close()
		}
	}
	require.NotZero(t, broken, "no fault pair broke the buffer")
}
