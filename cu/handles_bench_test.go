package cu

import (
	"sync/atomic"
	"testing"
)

// CPU-side costs of the handle table, with a driver that does nothing: the bookkeeping a
// create, map, unmap, release and retain add to the driver call, alone and from parallel
// goroutines (b.RunParallel: GOMAXPROCS of them, -cpu 16 for 16).

func benchCreate(t *handleTable, drv uint64) MemHandle {
	h, err := t.add(drv)
	if err != nil {
		panic(err)
	}
	return h
}

func benchRelease(t *handleTable, h MemHandle) {
	if err := t.release(h, func(uint64) error { return nil }); err != nil {
		panic(err)
	}
}

func benchPin(t *handleTable, h MemHandle) {
	s, _, err := t.pin(h)
	if err != nil {
		panic(err)
	}
	s.unpin()
}

func benchMap(t *handleTable, h MemHandle, start, size uint64) {
	s, _, err := t.pin(h)
	if err != nil {
		panic(err)
	}
	t.mapped(s, h, start, size)
}

func benchUnmap(t *handleTable, start, size uint64) {
	if err := t.unmap(start, size, func() error { return nil }); err != nil {
		panic(err)
	}
}

func benchRetain(t *handleTable, addr, drv uint64) MemHandle {
	h, _, err := t.retainAt(addr, func() (uint64, error) { return drv, nil })
	if err != nil {
		panic(err)
	}
	return h
}

func BenchmarkTablePin(b *testing.B) {
	t := new(handleTable)
	h := benchCreate(t, 0x7f0000001000)
	for b.Loop() {
		benchPin(t, h)
	}
}

// BenchmarkTableCycle is BenchmarkGPUCallLayers' cycle: create, map, unmap, release.
func BenchmarkTableCycle(b *testing.B) {
	t := new(handleTable)
	const start, size = 0x7f0000000000, 2 << 20
	drv := uint64(0x7e0000001000)
	for b.Loop() {
		drv += 0x40
		h := benchCreate(t, drv)
		benchMap(t, h, start, size)
		benchUnmap(t, start, size)
		benchRelease(t, h)
	}
}

func BenchmarkTableCycleParallel(b *testing.B) {
	t := new(handleTable)
	var worker atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		start := 0x100000000000 + w<<32
		drv := 0x7e0000000000 + w<<32
		for pb.Next() {
			drv += 0x40
			h := benchCreate(t, drv)
			benchMap(t, h, start, 2<<20)
			benchUnmap(t, start, 2<<20)
			benchRelease(t, h)
		}
	})
}

func BenchmarkTablePinParallel(b *testing.B) {
	t := new(handleTable)
	var worker atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		h := benchCreate(t, 0x7e0000000000+worker.Add(1)<<20)
		for pb.Next() {
			benchPin(t, h)
		}
	})
}

// BenchmarkTableUnmapRun unmaps 8 adjacent mappings in one call (a sparse array's
// decommit), with 1000 other mappings recorded.
func BenchmarkTableUnmapRun(b *testing.B) {
	t := new(handleTable)
	h := benchCreate(t, 0x7e0000001000)
	for i := range uint64(1000) {
		benchMap(t, h, 0x200000000000+i*(4<<20), 2<<20)
	}
	const start = 0x100000000000
	for b.Loop() {
		for i := range uint64(8) {
			benchMap(t, h, start+i*(2<<20), 2<<20)
		}
		benchUnmap(t, start, 8*(2<<20))
	}
}

// BenchmarkTableRetainInside retains at an address inside a 64 MiB mapping, with 1000 other
// mappings recorded.
func BenchmarkTableRetainInside(b *testing.B) {
	t := new(handleTable)
	const drv = 0x7e0000001000
	h := benchCreate(t, drv)
	for i := range uint64(1000) {
		benchMap(t, h, 0x200000000000+i*(4<<20), 2<<20)
	}
	benchMap(t, h, 0x100000000000, 64<<20)
	for b.Loop() {
		benchRelease(t, benchRetain(t, 0x100000000000+(40<<20)+100, drv))
	}
}
