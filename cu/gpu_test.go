//go:build gpu

package cu

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/stretchr/testify/require"
)

// requireDriver skips when no driver can be loaded, so gpu-tagged binaries run cleanly
// anywhere.
func requireDriver(tb testing.TB) {
	tb.Helper()
	if err := Init(); err != nil {
		if errors.Is(err, loader.ErrNoDriver) {
			tb.Skipf("no CUDA driver: %v", err)
		}
		tb.Fatalf("cuInit: %v", err)
	}
	if n, err := DeviceCount(); err != nil || n == 0 {
		tb.Skipf("no CUDA device (%d, %v)", n, err)
	}
}

func TestGPUResolveEverySymbol(t *testing.T) {
	requireDriver(t)
	t.Logf("driver library %s, cuGetProcAddress_v2: %v", LibraryPath(), lib.UsesGetProcAddress())
	require.True(t, lib.UsesGetProcAddress())
	for _, p := range Symbols() {
		if OptionalSymbol(p.Symbol().Name) {
			continue // TestGPUOptionalSymbols
		}
		require.NoError(t, p.Find(), p.Symbol().Name)
	}
}

func TestGPUMissingSymbol(t *testing.T) {
	requireDriver(t)
	p := lib.NewProc(loader.Symbol{Name: "cuvmmNoSuchEntryPoint", Version: 12000})
	err := call(p)
	require.ErrorIs(t, err, loader.ErrNotSupported)
	require.ErrorIs(t, err, ERROR_NOT_SUPPORTED)
	require.Contains(t, err.Error(), "cuvmmNoSuchEntryPoint")
	// Asking for an ABI newer than any driver has.
	q := lib.NewProc(loader.Symbol{Name: "cuMemCreate", Version: 99000})
	_, err = q.Addr()
	t.Logf("cuMemCreate@99000: %v", err)
	// and the rest keeps working
	_, err = DriverVersion()
	require.NoError(t, err)
}

func TestGPUDevice0(t *testing.T) {
	requireDriver(t)
	v, err := DriverVersion()
	require.NoError(t, err)
	require.GreaterOrEqual(t, v, 12000)
	n, err := DeviceCount()
	require.NoError(t, err)
	d, err := DeviceGet(0)
	require.NoError(t, err)
	name, err := d.Name()
	require.NoError(t, err)
	uuid, err := d.UUID()
	require.NoError(t, err)
	pci, err := d.PCIBusID()
	require.NoError(t, err)
	mem, err := d.TotalMem()
	require.NoError(t, err)
	maj, min, err := d.ComputeCapability()
	require.NoError(t, err)
	t.Logf("driver %d, %d devices; 0: %s %s %s %d MiB sm_%d%d", v, n, name, uuid, pci, mem>>20, maj, min)
	require.NotEmpty(t, name)
	require.NotEqual(t, UUID{}, uuid)
	require.Greater(t, mem, uint64(1<<30))
	for _, a := range []DeviceAttribute{DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING} {
		ok, err := d.Flag(a)
		require.NoError(t, err)
		require.True(t, ok, a.String())
	}
	for _, a := range DeviceAttributes() {
		v, err := d.Attribute(a)
		if err != nil {
			t.Logf("%v: %v", a, err)
			continue
		}
		_ = v
	}
	_, err = DeviceGet(n + 7)
	require.ErrorIs(t, err, ERROR_INVALID_DEVICE)
	require.Contains(t, err.Error(), "cuDeviceGet")
	_, err = Device(n + 7).Name()
	require.Error(t, err)
	ok, err := d.CanAccessPeer(d)
	t.Logf("CanAccessPeer(0,0) = %v, %v", ok, err)
}

func TestGPUContextAndCopies(t *testing.T) {
	requireDriver(t)
	d, _ := DeviceGet(0)
	ctx, err := d.Primary()
	require.NoError(t, err)
	free, total, err := ctx.MemGetInfo()
	require.NoError(t, err)
	require.LessOrEqual(t, free, total)
	p, err := ctx.MemAlloc(1 << 20)
	require.NoError(t, err)
	src := make([]byte, 1<<20)
	for i := range src {
		src[i] = byte(i * 7)
	}
	require.NoError(t, ctx.CopyHtoD(p, src))
	q, err := ctx.MemAlloc(1 << 20)
	require.NoError(t, err)
	require.NoError(t, ctx.CopyDtoD(q, p, 1<<20))
	dst := make([]byte, 1<<20)
	require.NoError(t, ctx.CopyDtoH(dst, q))
	require.True(t, bytes.Equal(src, dst))
	require.NoError(t, ctx.MemsetD32(q, 0x01020304, 1<<18))
	require.NoError(t, ctx.CopyDtoH(dst[:8], q))
	require.Equal(t, []byte{4, 3, 2, 1, 4, 3, 2, 1}, dst[:8])
	require.NoError(t, ctx.MemsetD8(q, 0xab, 3))
	require.NoError(t, ctx.Synchronize())
	// a copy larger than the allocation: the driver's error, not a crash
	err = ctx.CopyDtoD(q, p, 1<<30)
	require.Error(t, err)
	t.Logf("oversized DtoD: %v", err)
	require.NoError(t, ctx.MemFree(p))
	require.NoError(t, ctx.MemFree(q))

	// A retained context released twice: once is the driver's, then nothing.
	c2, err := d.PrimaryContext()
	require.NoError(t, err)
	require.NoError(t, c2.Release())
	require.NoError(t, c2.Release())
	require.ErrorIs(t, c2.Synchronize(), ErrContextReleased)
}

// VMM calls need no current context; copies do (201 without one).
func TestGPUContextRequirements(t *testing.T) {
	requireDriver(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, call(procCtxSetCurrent, 0))
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE, ID: 0}}
	g, err := MemGetAllocationGranularity(prop, MEM_ALLOC_GRANULARITY_MINIMUM)
	require.NoError(t, err)
	h, err := MemCreate(g, prop, 0)
	require.NoError(t, err)
	va, err := MemAddressReserve(g, 0, 0, 0)
	require.NoError(t, err)
	require.NoError(t, MemMap(va, g, 0, h, 0))
	require.NoError(t, MemSetAccess(va, g, []MemAccessDesc{{Location: prop.Location, Flags: MEM_ACCESS_FLAGS_PROT_READWRITE}}))
	cur, err := CurrentContext()
	require.NoError(t, err)
	require.Zero(t, cur, "VMM calls made no context current")
	buf := make([]byte, 64)
	err = callKeep(procMemcpyHtoD, uintptr(va), uintptr(unsafe.Pointer(&buf[0])), 64)
	require.ErrorIs(t, err, ERROR_INVALID_CONTEXT)
	require.NoError(t, MemUnmap(va, g))
	require.NoError(t, MemRelease(h))
	require.NoError(t, MemAddressFree(va, g))
	require.ErrorIs(t, MemRelease(h), ErrUnknownHandle)
}

func BenchmarkGPUDriverGetVersion(b *testing.B) {
	requireDriver(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DriverVersion(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGPUDeviceGetAttribute(b *testing.B) {
	requireDriver(b)
	d, _ := DeviceGet(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Attribute(DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGPUMemGetAllocationGranularity(b *testing.B) {
	requireDriver(b)
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MemGetAllocationGranularity(prop, MEM_ALLOC_GRANULARITY_MINIMUM); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGPUDropRace runs, from pairs of goroutines, the two patterns that corrupt the
// driver's heap when C threads do them at once (bench/c/droprace.c modes F and G): two
// unmaps of one allocation of which one frees it, and its last unmap with its last
// release. Through cu they are serialized per allocation, and the process survives.
func TestGPUDropRace(t *testing.T) {
	requireDriver(t)
	const pairs, rounds, g = 8, 1500, 2 << 20
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE}}
	before, _ := LiveHandles()
	var wg sync.WaitGroup
	for range pairs {
		wg.Go(func() {
			va, err := MemAddressReserve(2*g, 0, 0, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer MemAddressFree(va, 2*g)
			for i := range rounds {
				h, err := MemCreate(g, prop, 0)
				if err != nil {
					t.Error(err)
					return
				}
				for k := range 2 {
					if err := MemMap(va+DevicePtr(k*g), g, 0, h, 0); err != nil {
						t.Error(err)
						return
					}
				}
				var both sync.WaitGroup
				start := make(chan struct{})
				if i%2 == 0 { // F: both unmapped at once after the release
					if err := MemRelease(h); err != nil {
						t.Error(err)
						return
					}
					for k := range 2 {
						both.Go(func() { <-start; checkNoErr(t, MemUnmap(va+DevicePtr(k*g), g)) })
					}
				} else { // G: the last unmap and the last release at once
					if err := MemUnmap(va+g, g); err != nil {
						t.Error(err)
						return
					}
					both.Go(func() { <-start; checkNoErr(t, MemUnmap(va, g)) })
					both.Go(func() { <-start; checkNoErr(t, MemRelease(h)) })
				}
				close(start)
				both.Wait()
			}
		})
	}
	wg.Wait()
	if n, _ := LiveHandles(); n != before {
		t.Errorf("%d handles before, %d after", before, n)
	}
}

func checkNoErr(t *testing.T, err error) {
	if err != nil {
		t.Error(err)
	}
}

// cuMemGetHandleForAddressRange on a VMM mapping: a dma-buf descriptor where the device
// supports them. Whether the call needs a current context is logged: it is tried without
// one first.
func TestGPUDmaBufFD(t *testing.T) {
	requireDriver(t)
	d, _ := DeviceGet(0)
	if ok, err := d.Flag(DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED); err != nil || !ok {
		t.Skipf("device 0 does not support dma-buf (%v)", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, cuCtxSetCurrent(0))
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE}}
	// Memory exported to a NIC is created GPUDirect RDMA capable where the device can (as
	// NCCL does); whether a dma-buf needs it is not recorded yet.
	if ok, _ := d.Flag(DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED); ok {
		prop.GPUDirectRDMACapable = 1
	}
	t.Logf("allocation properties %+v", *prop)
	g, err := MemGetAllocationGranularity(prop, MEM_ALLOC_GRANULARITY_MINIMUM)
	require.NoError(t, err)
	h, err := MemCreate(g, prop, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, MemRelease(h)) }()
	va, err := MemAddressReserve(g, 0, 0, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, MemAddressFree(va, g)) }()
	require.NoError(t, MemMap(va, g, 0, h, 0))
	defer func() { require.NoError(t, MemUnmap(va, g)) }()
	require.NoError(t, MemSetAccess(va, g, []MemAccessDesc{{Location: prop.Location, Flags: MEM_ACCESS_FLAGS_PROT_READWRITE}}))

	fd, err := MemGetDmaBufFD(va, g, 0)
	t.Logf("without a current context: fd %d, %v", fd, err)
	if err != nil {
		ctx, cerr := d.Primary()
		require.NoError(t, cerr)
		require.NoError(t, ctx.Do(func() error {
			fd, err = MemGetDmaBufFD(va, g, 0)
			return nil
		}))
		t.Logf("with the primary context current: fd %d, %v", fd, err)
	}
	require.NoError(t, err)
	require.GreaterOrEqual(t, fd, 0)
	require.NoError(t, os.NewFile(uintptr(fd), "dma-buf").Close())

	_, err = MemGetDmaBufFD(va+1, g, 0)
	t.Logf("unaligned start: %v", err)
	require.Error(t, err)
}

// The fast path allocates nothing: the calls the VMM layer makes in a create, reserve, map,
// set access, unmap, release, free cycle, and the per-call benchmarks' queries. (Fewer than
// one allocation a cycle on average, as testing.AllocsPerRun counts: the handle table's
// shard maps grow now and then when the driver keeps returning new values.)
func TestGPUFastPathAllocatesNothing(t *testing.T) {
	requireDriver(t)
	if !fastPath {
		t.Skip("purego.SyscallN allocates")
	}
	d, _ := DeviceGet(0)
	prop := &MemAllocationProp{Type: MEM_ALLOCATION_TYPE_PINNED, Location: MemLocation{Type: MEM_LOCATION_TYPE_DEVICE}}
	g, err := MemGetAllocationGranularity(prop, MEM_ALLOC_GRANULARITY_MINIMUM)
	require.NoError(t, err)
	desc := []MemAccessDesc{{Location: prop.Location, Flags: MEM_ACCESS_FLAGS_PROT_READWRITE}}
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	for name, f := range map[string]func(){
		"DriverVersion": func() { _, err := DriverVersion(); must(err) },
		"Attribute": func() {
			_, err := d.Attribute(DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
			must(err)
		},
		"MemGetAllocationGranularity": func() { _, err := MemGetAllocationGranularity(prop, MEM_ALLOC_GRANULARITY_MINIMUM); must(err) },
		"cycle": func() {
			va, err := MemAddressReserve(g, 0, 0, 0)
			must(err)
			h, err := MemCreate(g, prop, 0)
			must(err)
			must(MemMap(va, g, 0, h, 0))
			must(MemSetAccess(va, g, desc))
			_, err = MemGetAllocationPropertiesFromHandle(h)
			must(err)
			must(MemUnmap(va, g))
			must(MemRelease(h))
			must(MemAddressFree(va, g))
		},
	} {
		require.Zero(t, testing.AllocsPerRun(1000, f), name)
	}
}
