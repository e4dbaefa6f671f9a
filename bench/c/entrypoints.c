// entrypoints: do cuGetProcAddress_v2 (ABI 10020, as cuvmm's loader asks) and dlsym give the same
// entry points for the five calls of a KV commit, and is a page index across 64 planes as
// fast through either? Build and run on a GPU machine:
//
//	gcc -O2 -I/usr/local/cuda/include -o entrypoints bench/c/entrypoints.c -ldl && ./entrypoints
//
// On an H200 with driver 580.159.04 the addresses are the same, and the commit through
// either took the same time (paired ratios 1.004 and 1.001 in two runs): that is also the
// noise of two identical C loops over two sets of reservations.
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef CUresult (*gpa_t)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
typedef CUresult (*create_t)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
typedef CUresult (*rel_t)(CUmemGenericAllocationHandle);
typedef CUresult (*map_t)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*unmap_t)(CUdeviceptr, size_t);
typedef CUresult (*acc_t)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
typedef CUresult (*res_t)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
struct fns { create_t create; rel_t rel; map_t map; unmap_t unmap; acc_t acc; };
#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s:%d: %d\n", __FILE__, __LINE__, r_); exit(1);} } while (0)
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(double*)a, y = *(double*)b; return x < y ? -1 : x > y; }
int main() {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
  CUresult (*init)(unsigned) = dlsym(h, "cuInit");
  CK(init(0));
  struct fns d = { dlsym(h, "cuMemCreate"), dlsym(h, "cuMemRelease"), dlsym(h, "cuMemMap"), dlsym(h, "cuMemUnmap"), dlsym(h, "cuMemSetAccess") };
  struct fns g; CUdriverProcAddressQueryResult st;
  const char *names[] = {"cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess"};
  void **gp = (void**)&g, **dp = (void**)&d;
  for (int i = 0; i < 5; i++) { CK(gpa(names[i], &gp[i], 10020, 1, &st)); printf("%s dlsym %p getproc %p %s\n", names[i], dp[i], gp[i], dp[i] == gp[i] ? "same" : "DIFFERENT"); }
  res_t reserve = dlsym(h, "cuMemAddressReserve");
  enum { planes = 64, idx = 256, page = 2 << 20 };
  CUdeviceptr va[2][planes];
  for (int w = 0; w < 2; w++) for (int p = 0; p < planes; p++) CK(reserve(&va[w][p], (size_t)page * idx, 0, 0, 0));
  CUmemAllocationProp prop = {0}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemAccessDesc acc = {0}; acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  double t[2][idx], r[idx];
  for (int i = 0; i < idx; i++) for (int k = 0; k < 2; k++) {
    int w = (i + k) % 2; struct fns *f = w ? &g : &d;
    double t0 = now();
    for (int p = 0; p < planes; p++) { CUmemGenericAllocationHandle a; CUdeviceptr at = va[w][p] + (size_t)i * page;
      CK(f->create(&a, page, &prop, 0)); CK(f->map(at, page, 0, a, 0)); CK(f->acc(at, page, &acc, 1)); CK(f->rel(a)); }
    t[w][i] = now() - t0;
  }
  for (int i = 0; i < idx; i++) r[i] = t[1][i] / t[0][i];
  qsort(r, idx, sizeof r[0], cmp); qsort(t[0], idx, sizeof(double), cmp); qsort(t[1], idx, sizeof(double), cmp);
  printf("page index of 64 planes: dlsym median %.3f ms, getproc median %.3f ms, median paired ratio getproc/dlsym %.4f (n %d)\n", t[0][idx/2]/1e6, t[1][idx/2]/1e6, r[idx/2], idx);
  return 0;
}
