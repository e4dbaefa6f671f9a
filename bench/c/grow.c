// From the project's shared benchmark files, ../shared/bench/grow.c (outside this repository),
// copied here unchanged below this comment so that bench/run.sh can build it on the GPU
// machine next to the Go port, bench/grow: the C growth baseline of issue 7. Do not edit the
// code: update it from ../shared/bench/grow.c instead.
//
// C baseline for buffer growth, after the VMM blog in ../seeds (004_*.txt): grows one device buffer
// to TOTAL GiB in STEP MiB increments four ways (VMM with the whole VA reserved up front, VMM that
// doubles its VA with the fixed-address hint and remaps when the hint is refused, cuMemAlloc+copy
// with doubling capacity, cuMemAlloc+copy to the exact size) and prints one line per strategy.
// Build and run on a GPU machine, next to the Go benchmark, in the same command:
//   gcc -O2 -I/usr/local/cuda/include grow.c -o /tmp/grow -lcuda && /tmp/grow 16 64 && /tmp/grow 4 2
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static CUdevice dev; static size_t G;
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("FAIL %s = %d at %d\n", #x, r_, __LINE__); exit(1); } } while (0)
int main(int argc, char **argv) {
  size_t total = (argc > 1 ? strtoull(argv[1], 0, 0) : 8) << 30, step = (argc > 2 ? strtoull(argv[2], 0, 0) : 64) << 20;
  CUcontext ctx; CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  CUmemAllocationProp p; memset(&p, 0, sizeof p); p.type = 1; p.location.type = 1; p.location.id = dev;
  CK(cuMemGetAllocationGranularity(&G, &p, 0));
  CUmemAccessDesc a; memset(&a, 0, sizeof a); a.location.type = 1; a.location.id = dev; a.flags = 3;
  int n = total / step;
  // (1) VMM, VA reserved up front
  { double t0 = now(); CUdeviceptr base; CK(cuMemAddressReserve(&base, total, 0, 0, 0)); CUmemGenericAllocationHandle *hs = calloc(n, sizeof *hs);
    for (int i = 0; i < n; i++) { CK(cuMemCreate(&hs[i], step, &p, 0)); CK(cuMemMap(base + i * step, step, 0, hs[i], 0)); CK(cuMemSetAccess(base + i * step, step, &a, 1)); }
    CK(cuCtxSynchronize()); double t1 = now();
    CK(cuMemUnmap(base, total)); for (int i = 0; i < n; i++) CK(cuMemRelease(hs[i])); CK(cuMemAddressFree(base, total)); double t2 = now();
    printf("grow vmm_reserved total=%zuGiB step=%zuMiB grow_ms %.1f teardown_ms %.1f\n", total >> 30, step >> 20, (t1 - t0) * 1e3, (t2 - t1) * 1e3); free(hs); }
  // (2) VMM, doubling VA: try hint at end, else reserve bigger and remap
  { double t0 = now(); CUdeviceptr base = 0; size_t res = 0, used = 0; int remaps = 0, extends = 0; CUmemGenericAllocationHandle *hs = calloc(n, sizeof *hs);
    CUdeviceptr vas[64]; size_t vsz[64]; int nv = 0;
    for (int i = 0; i < n; i++) {
      if (used + step > res) {
        size_t want = res ? res * 2 : step; CUdeviceptr nb = 0;
        if (res && cuMemAddressReserve(&nb, want - res, 0, base + res, 0) == 0 && nb == base + res) { vas[nv] = nb; vsz[nv++] = want - res; res = want; extends++; }
        else {
          if (nb) cuMemAddressFree(nb, want - res);
          CK(cuMemAddressReserve(&nb, want, 0, 0, 0));
          if (used) { CK(cuMemUnmap(base, used)); for (int j = 0; j < i; j++) CK(cuMemMap(nb + j * step, step, 0, hs[j], 0)); CK(cuMemSetAccess(nb, used, &a, 1)); }
          for (int k = 0; k < nv; k++) CK(cuMemAddressFree(vas[k], vsz[k]));
          nv = 0; vas[nv] = nb; vsz[nv++] = want; base = nb; res = want; remaps++; }
      }
      CK(cuMemCreate(&hs[i], step, &p, 0)); CK(cuMemMap(base + used, step, 0, hs[i], 0)); CK(cuMemSetAccess(base + used, step, &a, 1)); used += step;
    }
    CK(cuCtxSynchronize()); double t1 = now();
    CK(cuMemUnmap(base, used)); for (int i = 0; i < n; i++) CK(cuMemRelease(hs[i])); for (int k = 0; k < nv; k++) CK(cuMemAddressFree(vas[k], vsz[k]));
    printf("grow vmm_doubling total=%zuGiB step=%zuMiB grow_ms %.1f extends %d remaps %d\n", total >> 30, step >> 20, (t1 - t0) * 1e3, extends, remaps); free(hs); }
  // (3) cuMemAlloc + copy, doubling capacity
  { double t0 = now(); CUdeviceptr d = 0; size_t cap = 0, used = 0; int copies = 0;
    for (int i = 0; i < n; i++) {
      if (used + step > cap) { size_t nc = cap ? cap * 2 : step; CUdeviceptr nd; CK(cuMemAlloc(&nd, nc)); if (used) { CK(cuMemcpyDtoD(nd, d, used)); copies++; } if (d) CK(cuMemFree(d)); d = nd; cap = nc; }
      CK(cuMemsetD8(d + used, 1, step)); used += step; }
    CK(cuCtxSynchronize()); double t1 = now(); CK(cuMemFree(d));
    printf("grow memalloc_doubling total=%zuGiB step=%zuMiB grow_ms %.1f copies %d (touch included)\n", total >> 30, step >> 20, (t1 - t0) * 1e3, copies); }
  // (4) cuMemAlloc + copy exact each step
  { double t0 = now(); CUdeviceptr d = 0; size_t used = 0;
    for (int i = 0; i < n; i++) { CUdeviceptr nd; CK(cuMemAlloc(&nd, used + step)); if (used) CK(cuMemcpyDtoD(nd, d, used)); if (d) CK(cuMemFree(d)); d = nd; used += step; }
    CK(cuCtxSynchronize()); double t1 = now(); CK(cuMemFree(d));
    printf("grow memalloc_exact total=%zuGiB step=%zuMiB grow_ms %.1f\n", total >> 30, step >> 20, (t1 - t0) * 1e3); }
  return 0;
}
