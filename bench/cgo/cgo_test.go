package cgo

import (
	"fmt"
	"testing"
)

func load(b *testing.B) {
	if err := Load(); err != nil {
		b.Skip(err)
	}
}

func BenchmarkCgoDriverGetVersion(b *testing.B) {
	load(b)
	b.ReportAllocs()
	for b.Loop() {
		if DriverVersion() == 0 {
			b.Fatal("no version")
		}
	}
}

func BenchmarkCgoDeviceGetAttribute(b *testing.B) {
	load(b)
	b.ReportAllocs()
	for b.Loop() {
		Attribute(102, 0) // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
	}
}

func BenchmarkCgoMemGetAllocationGranularity(b *testing.B) {
	load(b)
	b.ReportAllocs()
	for b.Loop() {
		if Granularity() == 0 {
			b.Fatal("no granularity")
		}
	}
}

// BenchmarkCgoOps runs bench/c/callcost.c's VMM operation loop as C code inside this Go
// process, reporting the same metrics as vmm's BenchmarkGPUOps.
func BenchmarkCgoOps(b *testing.B) {
	load(b)
	for _, c := range []struct {
		size uint64
		reps int
	}{{2 << 20, 2000}, {64 << 20, 200}, {1 << 30, 20}} {
		b.Run(fmt.Sprintf("%dMiB", c.size>>20), func(b *testing.B) {
			var sum [5]float64
			n := 0
			for b.Loop() {
				r, err := Ops(c.size, c.reps)
				if err != nil {
					b.Fatal(err)
				}
				for i := range sum {
					sum[i] += r[i]
				}
				n++
			}
			for i, m := range []string{"ns/create", "ns/map", "ns/setaccess", "ns/unmap", "ns/release"} {
				b.ReportMetric(sum[i]/float64(n), m)
			}
		})
	}
}
