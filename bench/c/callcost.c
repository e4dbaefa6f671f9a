// C baseline for the per-call cost of the driver and of the VMM operations, to run next to
// the Go benchmarks on the same machine (see bench/run.sh). Build on the GPU machine:
//   gcc -O2 -I/usr/local/cuda/include callcost.c -o callcost -lcuda
// Output: one line per measurement, "c <name> <ns/op>". "callcost N ops" measures only the
// VMM operations, for runs that alternate with the Go benchmark.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("FAIL %s = %d at %d\n", #x, r_, __LINE__); exit(1); } } while (0)

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000000;
  CK(cuInit(0));
  CUdevice dev; CK(cuDeviceGet(&dev, 0));
  int v; double t0 = now();
  int opsOnly = argc > 2 && strcmp(argv[2], "ops") == 0; // "callcost N ops": only the VMM operations
  int batch = argc > 2 && strcmp(argv[2], "batch") == 0; // "callcost N batch": the batched operations
  if (batch) opsOnly = 1;
  {
    double c0 = now(), x = 0;
    for (int i = 0; i < 1000000; i++) x += now();
    printf("c clock_gettime %.1f\n", (now() - c0) / 1000000 + 0 * x);
  }
  if (opsOnly) n = 0;
  for (int i = 0; i < n; i++) cuDriverGetVersion(&v);
  if (!opsOnly) printf("c cuDriverGetVersion %.1f\n", (now() - t0) / n);
  t0 = now();
  for (int i = 0; i < n; i++) cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
  if (!opsOnly) printf("c cuDeviceGetAttribute %.1f\n", (now() - t0) / n);
  CUmemAllocationProp p; memset(&p, 0, sizeof p); p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = dev;
  size_t g; t0 = now();
  for (int i = 0; i < n; i++) cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (!opsOnly) printf("c cuMemGetAllocationGranularity %.1f\n", (now() - t0) / n);

  // Per-operation VMM cost for 2 MiB, 64 MiB and 1 GiB chunks: the same sequence as the Go
  // benchmark (BenchmarkGPUOps in vmm): create, reserve, map, set access, unmap, release, free.
  CUmemAccessDesc a; memset(&a, 0, sizeof a); a.location = p.location; a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t sizes[] = {2u << 20, 64u << 20, 1u << 30};
  int reps[] = {2000, 200, 20};
  if (batch) {
    // K chunks of one size: every create, then every map (into one reservation), every
    // set access, every unmap, every release, each phase timed as a whole.
    int ks[] = {512, 64, 8}, rounds[] = {8, 8, 4};
    for (int s = 0; s < 3; s++) {
      size_t sz = sizes[s]; int k = ks[s];
      CUmemGenericAllocationHandle hs[512];
      double t[5] = {0};
      for (int r = 0; r < rounds[s]; r++) {
        CUdeviceptr va; CK(cuMemAddressReserve(&va, sz * k, 0, 0, 0));
        double a0 = now(); for (int i = 0; i < k; i++) CK(cuMemCreate(&hs[i], sz, &p, 0));
        double a1 = now(); for (int i = 0; i < k; i++) CK(cuMemMap(va + i * sz, sz, 0, hs[i], 0));
        double a2 = now(); for (int i = 0; i < k; i++) CK(cuMemSetAccess(va + i * sz, sz, &a, 1));
        double a3 = now(); for (int i = 0; i < k; i++) CK(cuMemUnmap(va + i * sz, sz));
        double a4 = now(); for (int i = 0; i < k; i++) CK(cuMemRelease(hs[i]));
        double a5 = now(); CK(cuMemAddressFree(va, sz * k));
        t[0] += a1 - a0; t[1] += a2 - a1; t[2] += a3 - a2; t[3] += a4 - a3; t[4] += a5 - a4;
      }
      double n = (double)k * rounds[s];
      printf("cb create/%zuMiB %.1f\ncb map/%zuMiB %.1f\ncb setaccess/%zuMiB %.1f\ncb unmap/%zuMiB %.1f\ncb release/%zuMiB %.1f\n",
             sz >> 20, t[0] / n, sz >> 20, t[1] / n, sz >> 20, t[2] / n, sz >> 20, t[3] / n, sz >> 20, t[4] / n);
    }
    return 0;
  }
  for (int s = 0; s < 3; s++) {
    size_t sz = sizes[s]; int r = reps[s];
    double tc = 0, tm = 0, ta = 0, tu = 0, tr = 0;
    for (int i = 0; i < r; i++) {
      CUmemGenericAllocationHandle h; CUdeviceptr va;
      CK(cuMemAddressReserve(&va, sz, 0, 0, 0));
      double a0 = now(); CK(cuMemCreate(&h, sz, &p, 0));
      double a1 = now(); CK(cuMemMap(va, sz, 0, h, 0));
      double a2 = now(); CK(cuMemSetAccess(va, sz, &a, 1));
      double a3 = now(); CK(cuMemUnmap(va, sz));
      double a4 = now(); CK(cuMemRelease(h));
      double a5 = now(); CK(cuMemAddressFree(va, sz));
      tc += a1 - a0; tm += a2 - a1; ta += a3 - a2; tu += a4 - a3; tr += a5 - a4;
    }
    printf("c create/%zuMiB %.1f\nc map/%zuMiB %.1f\nc setaccess/%zuMiB %.1f\nc unmap/%zuMiB %.1f\nc release/%zuMiB %.1f\n",
           sz >> 20, tc / r, sz >> 20, tm / r, sz >> 20, ta / r, sz >> 20, tu / r, sz >> 20, tr / r);
  }
  return 0;
}
