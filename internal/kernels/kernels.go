// Package kernels holds the PTX of the kernels the examples and GPU tests launch.
package kernels

// VAdd is c[i] = a[i] + b[i] over n floats, the kernel examples/vectoradd and the GPU tests
// launch, written by hand for the oldest target the driver JIT-compiles
// from (PTX ISA 7.0, sm_50): the driver compiles it for whatever GPU runs it.
//
//	extern "C" __global__ void vadd(const float *a, const float *b, float *c, unsigned n) {
//	    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
//	    if (i < n) c[i] = a[i] + b[i];
//	}
const VAdd = `
.version 7.0
.target sm_50
.address_size 64

.visible .entry vadd(
	.param .u64 vadd_param_a,
	.param .u64 vadd_param_b,
	.param .u64 vadd_param_c,
	.param .u32 vadd_param_n
)
{
	.reg .pred %p<2>;
	.reg .f32 %f<4>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<11>;

	ld.param.u64 %rd1, [vadd_param_a];
	ld.param.u64 %rd2, [vadd_param_b];
	ld.param.u64 %rd3, [vadd_param_c];
	ld.param.u32 %r2, [vadd_param_n];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r1, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r1, %r2;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd4, %rd1;
	cvta.to.global.u64 %rd5, %rd2;
	cvta.to.global.u64 %rd6, %rd3;
	mul.wide.u32 %rd7, %r1, 4;
	add.s64 %rd8, %rd4, %rd7;
	add.s64 %rd9, %rd5, %rd7;
	add.s64 %rd10, %rd6, %rd7;
	ld.global.f32 %f1, [%rd8];
	ld.global.f32 %f2, [%rd9];
	add.f32 %f3, %f1, %f2;
	st.global.f32 [%rd10], %f3;
DONE:
	ret;
}
`

// Spin keeps one thread busy until ns nanoseconds of the GPU's global timer have passed: a
// kernel that is still running when another process asks something of this one (the
// checkpoint tests' lock timeout).
//
//	extern "C" __global__ void spin(unsigned long long ns) {
//	    unsigned long long t0 = globaltimer();
//	    while (globaltimer() - t0 < ns) {}
//	}
const Spin = `
.version 7.0
.target sm_50
.address_size 64

.visible .entry spin(
	.param .u64 spin_param_ns
)
{
	.reg .pred %p;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [spin_param_ns];
	mov.u64 %rd2, %globaltimer;
$L_loop:
	mov.u64 %rd3, %globaltimer;
	sub.s64 %rd4, %rd3, %rd2;
	setp.lt.u64 %p, %rd4, %rd1;
	@%p bra $L_loop;
	ret;
}
`
