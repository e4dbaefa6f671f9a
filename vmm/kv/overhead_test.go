package kv_test

import (
	"sync/atomic"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
)

// nopDriver is a backend whose memory calls do nothing, so that what a commit costs over it
// is the Go side's own: kv's, its transaction's and vmm's typed layer's.
type nopDriver struct {
	vmm.Backend
	next atomic.Uint64
}

func (d *nopDriver) Create(uint64, *cu.MemAllocationProp, uint64) (cu.MemHandle, error) {
	return cu.MemHandle(d.next.Add(1)), nil
}
func (d *nopDriver) Release(cu.MemHandle) error                                   { return nil }
func (d *nopDriver) Map(cu.DevicePtr, uint64, uint64, cu.MemHandle, uint64) error { return nil }
func (d *nopDriver) Unmap(cu.DevicePtr, uint64) error                             { return nil }
func (d *nopDriver) SetAccess(cu.DevicePtr, uint64, []cu.MemAccessDesc) error     { return nil }

// BenchmarkCommitGoSide commits one page index across 64 planes over nopDriver, page
// indices in turn, with an untimed Trim after each round of slots: the CPU time kv adds to
// the driver's (BenchmarkKVCommitAB in bench/cgo sets it against C on a GPU).
func BenchmarkCommitGoSide(b *testing.B) {
	s, err := sim.New(sim.PresetH200())
	if err != nil {
		b.Fatal(err)
	}
	const planes, slots = 64, 64
	g := kv.Geometry{Planes: planes, BytesPerToken: 2048, Slots: slots, MaxTokens: 32 << 10}
	c, err := kv.New(vmm.New(&nopDriver{Backend: s}), g, kv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s := i % slots
		if s == 0 && i > 0 {
			b.StopTimer()
			for k := range slots {
				_ = c.Release(k)
			}
			if err := c.Trim(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if err := c.Ensure(s, 1); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
