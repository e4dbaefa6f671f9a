package cgo

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
)

// BenchmarkKVCommitAB compares vmm/kv's commit of one page index across 64 planes (2 MiB
// pages: 64 creates, maps, set-access calls and releases) with C making the same calls
// (bench/c/kvcommit.c's loop), in one process, alternating page index by page index (each
// iteration a different one goes first), so that the driver's drift falls on both alike.
// After every 64 page indices both unmap them, untimed. Prints
//
//	kv-commit-ab c-median-ms <x> go-median-ms <x> median-paired-ratio <x> n <n>
func BenchmarkKVCommitAB(b *testing.B) {
	load(b)
	if err := ABLoad(); err != nil {
		b.Fatal(err)
	}
	be, err := vmm.CUDA()
	if err != nil {
		b.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const planes, slots, page, slot = 64, 64, 2 << 20, 64 << 20
	g := kv.Geometry{Planes: planes, BytesPerToken: 2048, Slots: slots, MaxTokens: slot / 2048}
	c, err := kv.New(vmm.New(be), g, kv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	bind := Binding{}
	var cp []uint64
	for range planes {
		va, err := bind.Reserve(slot * slots)
		if err != nil {
			b.Fatal(err)
		}
		cp = append(cp, va)
	}
	defer func() {
		for _, va := range cp {
			_ = bind.Free(va, slot*slots)
		}
	}()
	var cs, gs, ratios []float64
	for i := range b.N {
		s := i % slots
		if s == 0 && i > 0 {
			b.StopTimer()
			for k := range slots {
				_ = c.Release(k)
				for _, va := range cp {
					if err := bind.Unmap(va+uint64(k)*slot, page); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := c.Trim(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		var ct, gt int64
		cFirst := i%2 == 0
		for w := range 2 {
			if (w == 0) == cFirst {
				if ct, err = CKVCommit(cp, page, uint64(s)*slot); err != nil {
					b.Fatal(err)
				}
			} else {
				t0 := time.Now()
				if err := c.Ensure(s, 1); err != nil {
					b.Fatal(err)
				}
				gt = time.Since(t0).Nanoseconds()
			}
		}
		cs, gs = append(cs, float64(ct)/1e6), append(gs, float64(gt)/1e6)
		ratios = append(ratios, float64(gt)/float64(ct))
	}
	b.StopTimer()
	for k := range min(b.N, slots) {
		for _, va := range cp {
			_ = bind.Unmap(va+uint64(k)*slot, page)
		}
	}
	fmt.Printf("kv-commit-ab c-median-ms %.3f go-median-ms %.3f median-paired-ratio %.3f n %d\n", median(cs), median(gs), median(ratios), len(ratios))
	b.ReportMetric(median(ratios), "go/c")
}
