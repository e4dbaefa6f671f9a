//go:build gpu

package cu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/cuvmm/cuvmm/internal/kernels"
	"github.com/stretchr/testify/require"
)

// testPTX has two kernels: vadd (internal/kernels: c[i] = a[i] + b[i] on float32, i < n) and scalars, which
// stores one parameter of every kind Launch takes, so that the marshalling is checked by
// the driver and the GPU, not only by reading our own memory back.
const testPTX = kernels.VAdd + `
.visible .entry scalars(
	.param .u64 scalars_param_out,
	.param .u32 scalars_param_u32,
	.param .s32 scalars_param_s32,
	.param .u64 scalars_param_u64,
	.param .s64 scalars_param_s64,
	.param .f32 scalars_param_f32,
	.param .f64 scalars_param_f64
)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<5>;
	.reg .f32 %f<2>;
	.reg .f64 %fd<2>;

	ld.param.u64 %rd1, [scalars_param_out];
	cvta.to.global.u64 %rd2, %rd1;
	ld.param.u32 %r1, [scalars_param_u32];
	ld.param.s32 %r2, [scalars_param_s32];
	ld.param.u64 %rd3, [scalars_param_u64];
	ld.param.s64 %rd4, [scalars_param_s64];
	ld.param.f32 %f1, [scalars_param_f32];
	ld.param.f64 %fd1, [scalars_param_f64];
	st.global.u32 [%rd2], %r1;
	st.global.s32 [%rd2+4], %r2;
	st.global.u64 [%rd2+8], %rd3;
	st.global.s64 [%rd2+16], %rd4;
	st.global.f32 [%rd2+24], %f1;
	st.global.f64 [%rd2+32], %fd1;
	ret;
}
`

func TestGPUModuleVectorAdd(t *testing.T) {
	requireDriver(t)
	d, err := DeviceGet(0)
	require.NoError(t, err)
	ctx, err := d.Primary()
	require.NoError(t, err)

	mod, err := ctx.ModuleLoadData([]byte(testPTX))
	require.NoError(t, err)
	defer func() { require.NoError(t, mod.Unload()) }()
	vadd, err := mod.Function("vadd")
	require.NoError(t, err)
	require.Equal(t, "vadd", vadd.Name())

	const n = 1<<20 + 3 // not a multiple of the block: the bounds check matters
	size := uint64(4 * n)
	a, err := ctx.MemAlloc(size)
	require.NoError(t, err)
	defer func() { require.NoError(t, ctx.MemFree(a)) }()
	b, err := ctx.MemAlloc(size)
	require.NoError(t, err)
	defer func() { require.NoError(t, ctx.MemFree(b)) }()
	c, err := ctx.MemAlloc(size + 4) // one guard word past the end
	require.NoError(t, err)
	defer func() { require.NoError(t, ctx.MemFree(c)) }()

	ha, hb := make([]byte, size), make([]byte, size)
	for i := range n {
		binary.LittleEndian.PutUint32(ha[4*i:], math.Float32bits(float32(i)*0.5))
		binary.LittleEndian.PutUint32(hb[4*i:], math.Float32bits(float32(n-i)+0.25))
	}
	require.NoError(t, ctx.CopyHtoD(a, ha))
	require.NoError(t, ctx.CopyHtoD(b, hb))
	require.NoError(t, ctx.MemsetD32(c, 0x7fc00000, n+1)) // NaN everywhere, guard included

	const block = 256
	grid := uint32((n + block - 1) / block)
	require.NoError(t, ctx.Launch(vadd, [3]uint32{grid, 1, 1}, [3]uint32{block, 1, 1}, 0, a, b, c, uint32(n)))

	hc := make([]byte, size+4)
	require.NoError(t, ctx.CopyDtoH(hc, c))
	for i := range n {
		want := float32(i)*0.5 + (float32(n-i) + 0.25)
		got := math.Float32frombits(binary.LittleEndian.Uint32(hc[4*i:]))
		if got != want {
			t.Fatalf("c[%d] = %v, want %v", i, got, want)
		}
	}
	require.Equal(t, uint32(0x7fc00000), binary.LittleEndian.Uint32(hc[size:]), "the guard word past n is untouched")

	// Every argument kind, as the GPU sees it.
	scalars, err := mod.Function("scalars")
	require.NoError(t, err)
	one := [3]uint32{1, 1, 1}
	require.NoError(t, ctx.Launch(scalars, one, one, 0, c, uint32(0xdeadbeef), int32(-7), uint64(1<<40+5), int64(-1<<50), float32(1.5), float64(-2.25)))
	out := make([]byte, 40)
	require.NoError(t, ctx.CopyDtoH(out, c))
	le := binary.LittleEndian
	require.Equal(t, uint32(0xdeadbeef), le.Uint32(out[0:]))
	require.Equal(t, int32(-7), int32(le.Uint32(out[4:])))
	require.Equal(t, uint64(1<<40+5), le.Uint64(out[8:]))
	require.Equal(t, int64(-1<<50), int64(le.Uint64(out[16:])))
	require.Equal(t, float32(1.5), math.Float32frombits(le.Uint32(out[24:])))
	require.Equal(t, -2.25, math.Float64frombits(le.Uint64(out[32:])))
}

func TestGPUModuleErrors(t *testing.T) {
	requireDriver(t)
	d, err := DeviceGet(0)
	require.NoError(t, err)
	ctx, err := d.Primary()
	require.NoError(t, err)

	_, err = ctx.ModuleLoadData([]byte(".version 7.0\n.target sm_50\n.address_size 64\nthis is not ptx;\n"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "cuModuleLoadData")
	t.Logf("bad PTX: %v", err)

	mod, err := ctx.ModuleLoadData([]byte(testPTX))
	require.NoError(t, err)
	_, err = mod.Function("nosuchkernel")
	require.ErrorIs(t, err, ERROR_NOT_FOUND)
	require.Contains(t, err.Error(), `cuModuleGetFunction("nosuchkernel")`)

	vadd, err := mod.Function("vadd")
	require.NoError(t, err)
	one := [3]uint32{1, 1, 1}
	// Too many threads per block: the driver's error, named.
	err = ctx.Launch(vadd, one, [3]uint32{4096, 1, 1}, 0, DevicePtr(0), DevicePtr(0), DevicePtr(0), uint32(0))
	require.Error(t, err)
	require.Contains(t, err.Error(), "cuLaunchKernel")
	t.Logf("4096 threads: %v", err)
	// n = 0: every thread exits before touching memory, so null pointers are fine.
	require.NoError(t, ctx.Launch(vadd, one, [3]uint32{32, 1, 1}, 0, DevicePtr(0), DevicePtr(0), DevicePtr(0), uint32(0)))

	require.NoError(t, mod.Unload())
	require.NoError(t, mod.Unload(), "idempotent")
	require.ErrorIs(t, ctx.Launch(vadd, one, one, 0, DevicePtr(0), DevicePtr(0), DevicePtr(0), uint32(0)), ErrModuleUnloaded)
	_, err = mod.Function("vadd")
	require.ErrorIs(t, err, ErrModuleUnloaded)
}
