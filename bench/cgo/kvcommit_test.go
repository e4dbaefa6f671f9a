package cgo

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
)

// BenchmarkKVCommitAB compares vmm/kv's commit of one page index across 64 planes (2 MiB
// pages: 64 creates, maps, set-access calls and releases) with C making the same calls in
// one C loop, with a plain cgo binding making them one cgo call each, and with the vmm
// backend's calls (cuvmm without package kv and its transaction), in one process,
// rotating page index by page index (each iteration another one goes first), so that the
// driver's drift falls on all alike. After every 64 page indices all unmap them, untimed.
// Prints the medians and the medians of the per-page-index ratios over C:
//
//	kv-commit-ab c-median-ms <x> go-median-ms <x> median-paired-ratio <x> cgo-median-ms <x> cgo-paired-ratio <x> backend-median-ms <x> backend-paired-ratio <x> n <n>
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
	var cp, bp, vp []uint64 // the C loop's planes, the cgo binding's, the backend's
	for i := range 3 * planes {
		va, err := bind.Reserve(slot * slots)
		if err != nil {
			b.Fatal(err)
		}
		switch i / planes {
		case 0:
			cp = append(cp, va)
		case 1:
			bp = append(bp, va)
		default:
			vp = append(vp, va)
		}
	}
	all := slices.Concat(cp, bp, vp)
	defer func() {
		for _, va := range all {
			_ = bind.Free(va, slot*slots)
		}
	}()
	viaCgo := func(off uint64) (int64, error) {
		t0 := time.Now()
		for _, va := range bp {
			h, err := bind.Create(page)
			if err != nil {
				return 0, err
			}
			if err := bind.Map(va+off, page, h); err != nil {
				return 0, err
			}
			if err := bind.SetAccess(va+off, page); err != nil {
				return 0, err
			}
			if err := bind.Release(h); err != nil {
				return 0, err
			}
		}
		return time.Since(t0).Nanoseconds(), nil
	}
	viaBackend := func(off uint64) (int64, error) {
		t0 := time.Now()
		for _, va := range vp {
			h, err := be.Create(page, abProp, 0)
			if err != nil {
				return 0, err
			}
			if err := be.Map(cu.DevicePtr(va+off), page, 0, h, 0); err != nil {
				return 0, err
			}
			if err := be.SetAccess(cu.DevicePtr(va+off), page, abDesc); err != nil {
				return 0, err
			}
			if err := be.Release(h); err != nil {
				return 0, err
			}
		}
		return time.Since(t0).Nanoseconds(), nil
	}
	var cs, gs, bs, vs, ratios, bratios, vratios []float64
	for i := range b.N {
		s := i % slots
		if s == 0 && i > 0 {
			b.StopTimer()
			for k := range slots {
				_ = c.Release(k)
				for _, va := range all {
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
		var ct, gt, bt, vt int64
		for w := range 4 {
			switch (w + i) % 4 {
			case 0:
				ct, err = CKVCommit(cp, page, uint64(s)*slot)
			case 1:
				t0 := time.Now()
				err = c.Ensure(s, 1)
				gt = time.Since(t0).Nanoseconds()
			case 2:
				bt, err = viaCgo(uint64(s) * slot)
			case 3:
				vt, err = viaBackend(uint64(s) * slot)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		cs, gs, bs = append(cs, float64(ct)/1e6), append(gs, float64(gt)/1e6), append(bs, float64(bt)/1e6)
		vs = append(vs, float64(vt)/1e6)
		ratios, bratios = append(ratios, float64(gt)/float64(ct)), append(bratios, float64(bt)/float64(ct))
		vratios = append(vratios, float64(vt)/float64(ct))
	}
	b.StopTimer()
	for k := range min(b.N, slots) {
		for _, va := range all {
			_ = bind.Unmap(va+uint64(k)*slot, page)
		}
	}
	fmt.Printf("kv-commit-ab c-median-ms %.3f go-median-ms %.3f median-paired-ratio %.3f cgo-median-ms %.3f cgo-paired-ratio %.3f backend-median-ms %.3f backend-paired-ratio %.3f n %d\n",
		median(cs), median(gs), median(ratios), median(bs), median(bratios), median(vs), median(vratios), len(ratios))
	b.ReportMetric(median(ratios), "go/c")
}
