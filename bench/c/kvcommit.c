// C baseline for vmm/kv's BenchmarkGPUCommitPageIndex: committing one 2 MiB page index
// across 64 planes (each plane a reservation of 64 slots of 64 MiB), with the same driver
// calls as the Go cache: per plane, cuMemCreate, cuMemMap, cuMemSetAccess over the page,
// and cuMemRelease of the handle (the mapping holds the memory). Page indices go one slot
// after another; after every 64 the pages are unmapped again, untimed, as the Go benchmark
// trims. Build on the GPU machine:
//   gcc -O2 -I/usr/local/cuda/include kvcommit.c -o kvcommit -lcuda
// Output: "c kv-commit-page-index <ms> ms (N page indices)".
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("FAIL %s = %d at %d\n", #x, r_, __LINE__); exit(1); } } while (0)

enum { PLANES = 64, SLOTS = 64 };
static const size_t PAGE = 2u << 20, SLOT = 64u << 20;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 128;
  CK(cuInit(0));
  CUdevice dev; CK(cuDeviceGet(&dev, 0));
  CUmemAllocationProp p; memset(&p, 0, sizeof p); p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = dev;
  CUmemAccessDesc a; memset(&a, 0, sizeof a); a.location = p.location; a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr plane[PLANES];
  for (int i = 0; i < PLANES; i++) CK(cuMemAddressReserve(&plane[i], SLOT * SLOTS, 0, 0, 0));
  double total = 0;
  for (int k = 0; k < n; k++) {
    int slot = k % SLOTS;
    if (slot == 0 && k > 0)
      for (int s = 0; s < SLOTS; s++)
        for (int i = 0; i < PLANES; i++) CK(cuMemUnmap(plane[i] + s * SLOT, PAGE));
    double t0 = now();
    for (int i = 0; i < PLANES; i++) {
      CUmemGenericAllocationHandle h;
      CK(cuMemCreate(&h, PAGE, &p, 0));
      CK(cuMemMap(plane[i] + slot * SLOT, PAGE, 0, h, 0));
      CK(cuMemSetAccess(plane[i] + slot * SLOT, PAGE, &a, 1));
      CK(cuMemRelease(h));
    }
    total += now() - t0;
  }
  printf("c kv-commit-page-index %.3f ms (%d page indices)\n", total / n / 1e6, n);
  for (int s = 0; s < (n - 1) % SLOTS + 1; s++)
    for (int i = 0; i < PLANES; i++) CK(cuMemUnmap(plane[i] + s * SLOT, PAGE));
  for (int i = 0; i < PLANES; i++) CK(cuMemAddressFree(plane[i], SLOT * SLOTS));
  return 0;
}
