package vmm_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

func newSim(t testing.TB) *sim.Sim {
	t.Helper()
	s, err := sim.New(sim.PresetH200())
	require.NoError(t, err)
	return s
}

func TestManagerLifecycle(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	require.NoError(t, err)
	mem, err := m.Create(2*g, vmm.DeviceProps(0))
	require.NoError(t, err)
	require.Equal(t, 2*g, mem.Size())
	r, err := m.Reserve(4 * g)
	require.NoError(t, err)
	mp, err := r.Map(0, mem)
	require.NoError(t, err)
	require.Equal(t, r.Base(), mp.Addr())
	require.NoError(t, mp.SetAccess(vmm.ReadWrite(0)...))
	f, err := mp.Access(0)
	require.NoError(t, err)
	require.Equal(t, cu.MEM_ACCESS_FLAGS_PROT_READWRITE, f)

	want := []byte("kv cache block 0")
	require.NoError(t, m.WriteAt(0, want, mp.Addr()+100))
	got := make([]byte, len(want))
	require.NoError(t, m.ReadAt(0, got, mp.Addr()+100))
	require.Equal(t, want, got)

	// Release while mapped: the bytes stay until the mapping goes.
	require.NoError(t, mem.Close())
	require.NoError(t, mem.Close(), "Close is idempotent")
	require.NoError(t, m.ReadAt(0, got, mp.Addr()+100))
	require.Equal(t, want, got)

	_, err = mem.ExportFD()
	require.ErrorIs(t, err, vmm.ErrClosed)
	// Reservation.Close unmaps what is still mapped and frees.
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	require.NoError(t, mp.Close(), "already unmapped by the reservation")
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

func TestManagerErrorsNameTheOperation(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	g, _ := m.Granularity(vmm.DeviceProps(0), false)
	mem, err := m.Create(2*g, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer mem.Close()
	r, err := m.Reserve(2 * g)
	require.NoError(t, err)
	defer r.Close()

	mp, err := r.Map(0, mem)
	require.NoError(t, err)
	_, err = r.Map(0, mem) // where it is mapped already
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	var ve *vmm.Error
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "map", ve.Op)
	require.Contains(t, err.Error(), fmt.Sprintf("vmm: map %v+4MiB: CUDA_ERROR_INVALID_VALUE", r.Base()))
	require.NoError(t, mp.Close())

	_, err = r.Map(g, mem)
	require.ErrorIs(t, err, vmm.ErrOutOfRange)
	require.Contains(t, err.Error(), "vmm: map")

	_, err = m.Create(g+1, vmm.DeviceProps(0))
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	require.Contains(t, err.Error(), "vmm: create 2097153B on device 0")

	_, err = m.Create(g, vmm.DeviceProps(9))
	require.ErrorIs(t, err, cu.ERROR_INVALID_DEVICE)

	_, err = m.Reserve(0)
	require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE)
	require.Contains(t, err.Error(), "vmm: reserve 0B")
}

// Many goroutines create, map, grant, copy, unmap and release at once; run with -race.
func TestManagerConcurrent(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	g, _ := m.Granularity(vmm.DeviceProps(0), false)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := cycle(m, g, byte(w*31+i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

func cycle(m *vmm.Manager, g uint64, seed byte) (err error) {
	mem, err := m.Create(g, vmm.DeviceProps(0))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, mem.Close()) }()
	r, err := m.Reserve(g)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	mp, err := r.Map(0, mem)
	if err != nil {
		return err
	}
	if err := mp.SetAccess(vmm.ReadWrite(0)...); err != nil {
		return err
	}
	in := []byte{seed, seed + 1, seed + 2}
	if err := m.WriteAt(0, in, mp.Addr()+7); err != nil {
		return err
	}
	out := make([]byte, 3)
	if err := m.ReadAt(0, out, mp.Addr()+7); err != nil {
		return err
	}
	if string(in) != string(out) {
		return fmt.Errorf("read %v, wrote %v", out, in)
	}
	return mp.Close()
}

// Concurrent Close of the same objects: exactly one driver call each, no error.
func TestCloseConcurrent(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	g, _ := m.Granularity(vmm.DeviceProps(0), false)
	mem, err := m.Create(g, vmm.DeviceProps(0))
	require.NoError(t, err)
	r, err := m.Reserve(g)
	require.NoError(t, err)
	_, err = r.Map(0, mem)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); require.NoError(t, r.Close()) }()
		go func() { defer wg.Done(); require.NoError(t, mem.Close()) }()
	}
	wg.Wait()
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// Maps racing the reservation's Close: each Map either fails with ErrClosed or makes a
// mapping that Close then unmaps; Close never fails on a mapping it did not see, and
// nothing is left mapped in a freed reservation.
func TestMapRacingClose(t *testing.T) {
	s := newSim(t)
	m := vmm.New(s)
	g, _ := m.Granularity(vmm.DeviceProps(0), false)
	const slots = 8
	for round := range 200 {
		mems := make([]*vmm.Allocation, slots)
		for i := range mems {
			var err error
			mems[i], err = m.Create(g, vmm.DeviceProps(0))
			require.NoError(t, err)
		}
		r, err := m.Reserve(slots * g)
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := r.Map(uint64(i)*g, mems[i]); err != nil && !errors.Is(err, vmm.ErrClosed) {
					t.Errorf("round %d: map %d: %v", round, i, err)
				}
			}()
		}
		close(start)
		if round%2 == 1 {
			runtime.Gosched()
		}
		require.NoError(t, r.Close(), "round %d", round)
		wg.Wait()
		st := s.Stats()
		require.Zero(t, st.Mappings, "round %d: a mapping outlived its reservation", round)
		require.Zero(t, st.Reservations, "round %d", round)
		for _, mem := range mems {
			require.NoError(t, mem.Close())
		}
	}
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// pausedUnmap is a backend whose first Unmap, once made, waits until resume is closed,
// holding the caller between the driver's unmap and what it does next.
type pausedUnmap struct {
	vmm.Backend
	once             sync.Once
	unmapped, resume chan struct{}
}

func (b *pausedUnmap) Unmap(ptr cu.DevicePtr, size uint64) error {
	err := b.Backend.Unmap(ptr, size)
	b.once.Do(func() {
		close(b.unmapped)
		<-b.resume
	})
	return err
}

// A Map at the address of a Mapping whose Close has unmapped it but not yet dropped it from
// the reservation's list lands before it there; the Close must still drop its own, and an
// Unmap of the new mapping must not see the old one as split.
func TestMappingCloseRacingMapAtItsAddress(t *testing.T) {
	s := newSim(t)
	b := &pausedUnmap{Backend: s, unmapped: make(chan struct{}), resume: make(chan struct{})}
	m := vmm.New(b)
	r, err := m.Reserve(8 * mib)
	require.NoError(t, err)
	big, err := m.Create(4*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	small, err := m.Create(2*mib, vmm.DeviceProps(0))
	require.NoError(t, err)
	old, err := r.Map(0, big)
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- old.Close() }()
	<-b.unmapped
	_, err = r.Map(0, small)
	require.NoError(t, err, "the range is free in the driver")
	close(b.resume)
	require.NoError(t, <-closed)
	require.NoError(t, r.Unmap(0, 2*mib), "the closed mapping is gone from the list")
	require.NoError(t, big.Close())
	require.NoError(t, small.Close())
	require.NoError(t, r.Close())
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
}

// uncomparable is a backend of a type == cannot compare.
type uncomparable struct {
	*sim.Sim
	notes map[string]string
}

// An allocation maps into the reservations of any Manager over the same backend, and into
// no other backend's: there its handle names another allocation, or none.
func TestMapAcrossManagers(t *testing.T) {
	s := newSim(t)
	m1, m2, other := vmm.New(s), vmm.New(s), vmm.New(newSim(t))
	a, err := m1.Create(2<<20, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer a.Close()
	r, err := m2.Reserve(2 << 20)
	require.NoError(t, err)
	defer r.Close()
	mp, err := r.Map(0, a)
	require.NoError(t, err, "two Managers over one backend")
	require.NoError(t, mp.Close())
	ro, err := other.Reserve(2 << 20)
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Map(0, a)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorContains(t, err, "another backend")

	// Over a backend that cannot be compared, only the Manager's own reservations.
	u := uncomparable{s, map[string]string{}}
	mu1, mu2 := vmm.New(u), vmm.New(u)
	b, err := mu1.Create(2<<20, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer b.Close()
	ru1, err := mu1.Reserve(2 << 20)
	require.NoError(t, err)
	defer ru1.Close()
	ru2, err := mu2.Reserve(2 << 20)
	require.NoError(t, err)
	defer ru2.Close()
	_, err = ru2.Map(0, b)
	require.ErrorIs(t, err, vmm.ErrInvalid, "and no panic comparing them")
	mp, err = ru1.Map(0, b)
	require.NoError(t, err)
	require.NoError(t, mp.Close())
	// A comparable wrapper of one that is not: no panic either.
	mw1, mw2 := vmm.New(wrapped{u}), vmm.New(wrapped{u})
	c, err := mw1.Create(2<<20, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer c.Close()
	rw2, err := mw2.Reserve(2 << 20)
	require.NoError(t, err)
	defer rw2.Close()
	_, err = rw2.Map(0, c)
	require.ErrorIs(t, err, vmm.ErrInvalid)
}

// wrapped is a comparable struct around a backend, which may not be.
type wrapped struct{ vmm.Backend }

// A multicast object binds and maps only with objects of its own backend.
func TestMulticastAcrossBackends(t *testing.T) {
	s1, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	s2, err := sim.New(sim.PresetHGX8())
	require.NoError(t, err)
	m1, m2 := vmm.New(s1), vmm.New(s2)
	props := vmm.MulticastProps{Devices: 1}
	props.Size, err = m1.MulticastGranularity(props, true)
	require.NoError(t, err)
	mc, err := m1.CreateMulticast(props)
	require.NoError(t, err)
	defer mc.Close()
	require.NoError(t, mc.AddDevice(0))
	theirs, err := m2.Create(props.Size, vmm.DeviceProps(0))
	require.NoError(t, err)
	defer theirs.Close()
	err = mc.Bind(0, theirs, 0, props.Size)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorContains(t, err, "another backend")
	r2, err := m2.Reserve(props.Size)
	require.NoError(t, err)
	defer r2.Close()
	_, err = r2.MapMulticast(0, mc)
	require.ErrorIs(t, err, vmm.ErrInvalid)
	require.ErrorContains(t, err, "another backend")
}
