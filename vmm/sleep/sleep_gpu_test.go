//go:build gpu

package sleep_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/kernels"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/sleep"
	"github.com/cuvmm/cuvmm/vmm/sparse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func cudaOrSkip(t testing.TB) *vmm.Manager {
	t.Helper()
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	return vmm.New(b)
}

const gib = 1 << 30

// TestGPUModes: 1 GiB in 64 MiB chunks through each mode; the device's free memory rises
// by the region's size while it sleeps; every byte comes back (zeros after a discard);
// nothing leaks.
func TestGPUModes(t *testing.T) {
	m := cudaOrSkip(t)
	ctx := context.Background()
	handles, _ := cu.LiveHandles()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		t.Run(mode.String(), func(t *testing.T) {
			p := sleep.New(m, sleep.Options{})
			defer p.Close()
			r, err := p.Alloc("engine", gib, 0)
			require.NoError(t, err)
			want := pattern.Bytes(3, gib)
			_, err = r.WriteAt(want, 0)
			require.NoError(t, err)
			require.NoError(t, p.Prepare("engine"))
			before, _, err := m.MemInfo(0)
			require.NoError(t, err)
			require.NoError(t, p.Sleep(ctx, "engine", mode))
			asleep, _, err := m.MemInfo(0)
			require.NoError(t, err)
			t.Logf("free device memory %d before, %d asleep: rose by %d (region %d)", before, asleep, int64(asleep)-int64(before), gib)
			// A parked GiB gave back 1 GiB less 2 MiB on an H200 (driver 580): the driver
			// keeps device memory for mapping host memory at the range.
			slack := uint64(0)
			if mode == sleep.Park {
				slack = 2 << 20
			}
			assert.GreaterOrEqual(t, asleep+slack, before+gib, "free device memory rose by the region")
			require.NoError(t, p.Wake(ctx, "engine"))
			got := make([]byte, gib)
			_, err = r.ReadAt(got, 0)
			require.NoError(t, err)
			if mode == sleep.Discard {
				want = make([]byte, gib)
			}
			assert.True(t, bytes.Equal(want, got), "every byte after the wake")
			require.NoError(t, p.Close())
		})
	}
	after, _ := cu.LiveHandles()
	assert.Equal(t, handles, after, "live handles before and after")
}

// TestGPUParkedKernel: a kernel launched on a parked range reads the bytes from before the
// sleep, and its writes there survive the wake, while the device memory is free.
func TestGPUParkedKernel(t *testing.T) {
	m := cudaOrSkip(t)
	ctx := context.Background()
	handles, _ := cu.LiveHandles()
	p := sleep.New(m, sleep.Options{})
	const size = 128 << 20
	const n = size / 2 / 4 // floats in each half
	r, err := p.Alloc("engine", size, 0)
	require.NoError(t, err)
	a := make([]byte, size/2)
	for i := range n {
		binary.LittleEndian.PutUint32(a[4*i:], math.Float32bits(float32(i%1000)))
	}
	_, err = r.WriteAt(a, 0)
	require.NoError(t, err)
	ones, err := p.Alloc("ones", size/2, 0)
	require.NoError(t, err)
	one := make([]byte, size/2)
	for i := range n {
		binary.LittleEndian.PutUint32(one[4*i:], math.Float32bits(1))
	}
	_, err = ones.WriteAt(one, 0)
	require.NoError(t, err)

	before, _, err := m.MemInfo(0)
	require.NoError(t, err)
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Park))
	asleep, _, err := m.MemInfo(0)
	require.NoError(t, err)
	t.Logf("free device memory rose by %d while %d bytes were parked", int64(asleep)-int64(before), size)
	assert.GreaterOrEqual(t, asleep+2<<20, before+size, "free device memory rose by the parked size (less the 2 MiB the driver keeps, TestGPUModes)")

	d, err := cu.DeviceGet(0)
	require.NoError(t, err)
	c, err := d.Primary()
	require.NoError(t, err)
	mod, err := c.ModuleLoadData([]byte(kernels.VAdd))
	require.NoError(t, err)
	defer mod.Unload()
	k, err := mod.Function("vadd")
	require.NoError(t, err)
	base := r.Base()
	// c = a + 1, a the parked first half, c the parked second half.
	require.NoError(t, c.Launch(k, [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, base, ones.Base(), base+size/2, uint32(n)))
	require.NoError(t, p.Wake(ctx, "engine"))
	got := make([]byte, size)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a, got[:size/2]), "the parked input")
	for i := 0; i < n; i += 997 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(got[size/2+4*i:]))
		require.Equal(t, float32(i%1000)+1, v, "element %d written on the parked range", i)
	}
	require.NoError(t, p.Close())
	after, _ := cu.LiveHandles()
	assert.Equal(t, handles, after)
}

// TestGPUWakeOutOfMemory: another allocation takes the memory while the tag sleeps; the
// wake says how much it needs and how much is free, and succeeds once the memory is back.
func TestGPUWakeOutOfMemory(t *testing.T) {
	m := cudaOrSkip(t)
	ctx := context.Background()
	handles, _ := cu.LiveHandles()
	p := sleep.New(m, sleep.Options{})
	r, err := p.Alloc("engine", 2*gib, 0)
	require.NoError(t, err)
	want := pattern.Bytes(9, 2*gib)
	_, err = r.WriteAt(want, 0)
	require.NoError(t, err)
	require.NoError(t, p.Sleep(ctx, "engine", sleep.Offload))
	free, _, err := m.MemInfo(0)
	require.NoError(t, err)
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	require.NoError(t, err)
	fill := (free - gib) / g * g // leave a GiB: half of what the tag needs
	filler, err := m.Create(fill, vmm.DeviceProps(0))
	require.NoError(t, err)
	err = p.Wake(ctx, "engine")
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	assert.Contains(t, err.Error(), "need ")
	t.Log(err)
	require.NoError(t, filler.Close())
	require.NoError(t, p.Wake(ctx, "engine"))
	got := make([]byte, 2*gib)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got))
	require.NoError(t, p.Close())
	after, _ := cu.LiveHandles()
	assert.Equal(t, handles, after)
}

// BenchmarkGPUSleep times a tag of CUVMM_SLEEP_GIB GiB (16 by default) in chunks of 64 MiB
// and of 2 MiB (a sparse array's pages; a quarter of the size, the driver's calls per GiB
// being 32 times as many) through each mode, next to the ceiling measured in the same run:
// one device-to-device copy of the whole size into prepared host memory and back. Rates
// are GiB/s of the tag's size; discard is milliseconds per GiB. "first" is the first
// sleep of a tag that Prepare made host memory for, "unprepared" a sleep that pins host
// memory on its way, chunk by chunk, as torch_memory_saver does.
func BenchmarkGPUSleep(b *testing.B) {
	m := cudaOrSkip(b)
	ctx := context.Background()
	size := uint64(16) * gib // CUVMM_SLEEP_GIB=64 needs 64 GiB of host memory to pin
	if v, err := strconv.Atoi(os.Getenv("CUVMM_SLEEP_GIB")); err == nil && v > 0 {
		size = uint64(v) * gib
	}
	rate := func(n uint64, d time.Duration) float64 { return float64(n) / gib / d.Seconds() }
	// Memory of sz bytes in chunks of chunk under tag "t": a pool's own, or a growable
	// buffer's (grown a chunk at a time) tagged.
	own := func(p *sleep.Pool, sz, chunk uint64) (cu.DevicePtr, func() error, error) {
		r, err := p.Alloc("t", sz, 0)
		if err != nil {
			return 0, nil, err
		}
		return r.Base(), r.Close, nil
	}
	grown := func(p *sleep.Pool, sz, chunk uint64) (cu.DevicePtr, func() error, error) {
		buf, err := buffer.New(m, 0, buffer.Options{Policy: buffer.Exact, Reserve: sz, FixedBase: true})
		if err != nil {
			return 0, nil, err
		}
		for n := chunk; n <= sz && err == nil; n += chunk {
			err = buf.Grow(n)
		}
		if err == nil {
			err = p.Tag("t", buf)
		}
		if err != nil {
			return 0, nil, errors.Join(err, buf.Close())
		}
		return buf.Base(), func() error { return errors.Join(p.Close(), buf.Close()) }, nil // Close wakes it
	}
	for _, c := range []struct {
		name  string
		chunk uint64
		make  func(*sleep.Pool, uint64, uint64) (cu.DevicePtr, func() error, error)
	}{{"pool", 64 << 20, own}, {"buffer", 64 << 20, grown}, {"pool", 2 << 20, own}} {
		chunk := c.chunk
		sz := size
		if chunk < 64<<20 {
			sz = size / 4
		}
		b.Run(fmt.Sprintf("%s/chunk=%dMiB/size=%dGiB", c.name, chunk>>20, sz/gib), func(b *testing.B) {
			for range b.N {
				p := sleep.New(m, sleep.Options{Chunk: chunk})
				base, closeMem, err := c.make(p, sz, chunk)
				require.NoError(b, err)
				require.NoError(b, m.Fill(0, base, 0x5a, sz))
				t0 := time.Now()
				require.NoError(b, p.Prepare("t"))
				b.ReportMetric(rate(sz, time.Since(t0)), "prepare-GiB/s")
				// The ceiling: the same bytes to the same host memory and back, one copy each.
				// (Of at most 16 GiB, so that a 64 GiB tag's host memory and the ceiling's fit in
				// the host's memory together; the rate does not depend on the size there.)
				cs := min(sz, 16*gib)
				staging, err := hostRange(m, cs)
				require.NoError(b, err)
				t0 = time.Now()
				require.NoError(b, m.Copy(0, staging.Base(), base, cs))
				b.ReportMetric(rate(cs, time.Since(t0)), "ceiling-out-GiB/s")
				t0 = time.Now()
				require.NoError(b, m.Copy(0, base, staging.Base(), cs))
				b.ReportMetric(rate(cs, time.Since(t0)), "ceiling-in-GiB/s")
				require.NoError(b, staging.Close())

				t0 = time.Now()
				require.NoError(b, p.Sleep(ctx, "t", sleep.Offload))
				first := time.Since(t0)
				b.ReportMetric(rate(sz, first), "offload-first-GiB/s")
				t0 = time.Now()
				require.NoError(b, p.Wake(ctx, "t"))
				b.ReportMetric(rate(sz, time.Since(t0)), "wake-offload-GiB/s")
				t0 = time.Now()
				require.NoError(b, p.Sleep(ctx, "t", sleep.Offload))
				later := time.Since(t0)
				b.ReportMetric(rate(sz, later), "offload-GiB/s")
				b.ReportMetric(first.Seconds()/later.Seconds(), "first/later")
				require.NoError(b, p.Wake(ctx, "t"))
				t0 = time.Now()
				require.NoError(b, p.Sleep(ctx, "t", sleep.Park))
				b.ReportMetric(rate(sz, time.Since(t0)), "park-GiB/s")
				t0 = time.Now()
				require.NoError(b, p.Wake(ctx, "t"))
				b.ReportMetric(rate(sz, time.Since(t0)), "wake-park-GiB/s")
				t0 = time.Now()
				require.NoError(b, p.Sleep(ctx, "t", sleep.Discard))
				b.ReportMetric(float64(time.Since(t0).Milliseconds())/float64(sz/gib), "discard-ms/GiB")
				t0 = time.Now()
				require.NoError(b, p.Wake(ctx, "t"))
				b.ReportMetric(rate(sz, time.Since(t0)), "wake-discard-GiB/s")
				require.NoError(b, closeMem())
				require.NoError(b, p.Close())

				// Pinning on the way: host memory made chunk by chunk during the sleep.
				p = sleep.New(m, sleep.Options{Chunk: chunk, ReleaseHost: true})
				_, closeMem, err = c.make(p, sz, chunk)
				require.NoError(b, err)
				t0 = time.Now()
				require.NoError(b, p.Sleep(ctx, "t", sleep.Offload))
				b.ReportMetric(rate(sz, time.Since(t0)), "offload-unprepared-GiB/s")
				require.NoError(b, closeMem())
				require.NoError(b, p.Close())
			}
		})
	}
}

// hostRange is host memory mapped for device 0, for the ceiling's copies.
func hostRange(m *vmm.Manager, size uint64) (*vmm.Region, error) {
	tx := m.Begin(nil)
	g, err := tx.NewRegion(size, 0)
	if err != nil {
		return nil, tx.Rollback(err)
	}
	a, err := tx.Create(size, vmm.Props{Location: vmm.OnHost()})
	if err != nil {
		return nil, tx.Rollback(err)
	}
	if err := tx.Add(g, 0, vmm.ReadWrite(0), a); err != nil {
		return nil, tx.Rollback(err)
	}
	tx.Commit()
	return g, nil
}

// TestGPUTagSparse: a sparse array's committed pages, tagged, sleep in each mode and wake
// with their bytes (zeros after a discard); the array refuses commits while they sleep; a
// page exported as a descriptor is refused; nothing leaks.
func TestGPUTagSparse(t *testing.T) {
	m := cudaOrSkip(t)
	ctx := context.Background()
	handles, _ := cu.LiveHandles()
	for _, mode := range []sleep.Mode{sleep.Offload, sleep.Park, sleep.Discard} {
		t.Run(mode.String(), func(t *testing.T) {
			props := vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
			a, err := sparse.New(m, 4*gib, sparse.Options{Props: &props})
			require.NoError(t, err)
			defer a.Close()
			want := pattern.Bytes(byte(mode), 64<<20)
			_, err = a.WriteAt(want, gib+3)
			require.NoError(t, err)
			p := sleep.New(m, sleep.Options{})
			defer p.Close()
			require.NoError(t, p.Tag("kv", a))
			require.NoError(t, p.Sleep(ctx, "kv", mode))
			require.ErrorIs(t, a.Commit(0, 1), vmm.ErrAsleep)
			got := make([]byte, len(want))
			_, err = a.ReadAt(got, gib+3)
			if mode == sleep.Park {
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want, got), "parked pages read through the host")
			} else {
				require.ErrorIs(t, err, vmm.ErrAsleep)
			}
			require.NoError(t, p.Wake(ctx, "kv"))
			_, err = a.ReadAt(got, gib+3)
			require.NoError(t, err)
			if mode == sleep.Discard {
				want = make([]byte, len(want))
			}
			assert.True(t, bytes.Equal(want, got), "every byte after the wake")
			require.NoError(t, p.Close())

			fd, err := a.Regions()[0].Chunks(gib, 1)[0].Alloc.ExportFD()
			require.NoError(t, err)
			require.NoError(t, os.NewFile(uintptr(fd), "exported").Close())
			require.ErrorIs(t, sleep.New(m, sleep.Options{}).Tag("kv", a), sleep.ErrShared)
			require.NoError(t, a.Close())
		})
	}
	after, _ := cu.LiveHandles()
	assert.Equal(t, handles, after, "live handles before and after")
}
