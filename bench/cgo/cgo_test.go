package cgo

import "testing"

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
