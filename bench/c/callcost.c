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
