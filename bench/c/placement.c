// C baseline for the simulator's goroutine benchmark (sim BenchmarkCycleGoroutines, "cycle"):
// how the driver's throughput changes from 1 to 8 threads when every cycle places and frees
// its own reservation. Build on the GPU machine:
//   gcc -O2 -I/usr/local/cuda/include placement.c -o placement -lcuda -lpthread
// Output: one line per workload and thread count, "placement <workload> <threads> <ops/s>",
// where reserve-free is one cuMemAddressReserve and cuMemAddressFree of 2 MiB, and cycle the
// sim benchmark's whole cycle: create, reserve, map, set access, unmap, free, release.
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_) { printf("FAIL %s = %d at %d\n", #x, r_, __LINE__); exit(1); } } while (0)

static CUcontext ctx;
static CUmemAllocationProp prop;
static CUmemAccessDesc desc;
static const size_t size = 2u << 20;

struct job { int cycle, iters; pthread_barrier_t *start; };

static void *work(void *arg) {
  struct job *j = arg;
  CK(cuCtxSetCurrent(ctx));
  pthread_barrier_wait(j->start);
  for (int i = 0; i < j->iters; i++) {
    CUdeviceptr va; CUmemGenericAllocationHandle h;
    if (j->cycle) CK(cuMemCreate(&h, size, &prop, 0));
    CK(cuMemAddressReserve(&va, size, 0, 0, 0));
    if (j->cycle) {
      CK(cuMemMap(va, size, 0, h, 0));
      CK(cuMemSetAccess(va, size, &desc, 1));
      CK(cuMemUnmap(va, size));
    }
    CK(cuMemAddressFree(va, size));
    if (j->cycle) CK(cuMemRelease(h));
  }
  return 0;
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

// run returns the workload's operations (reserve-free pairs or cycles) per second on n threads.
static double run(int cycle, int n, int total) {
  pthread_t th[16]; struct job j[16]; pthread_barrier_t start;
  pthread_barrier_init(&start, 0, n + 1);
  for (int i = 0; i < n; i++) {
    j[i] = (struct job){cycle, total / n, &start};
    pthread_create(&th[i], 0, work, &j[i]);
  }
  pthread_barrier_wait(&start);
  double t0 = now();
  for (int i = 0; i < n; i++) pthread_join(th[i], 0);
  double dt = now() - t0;
  pthread_barrier_destroy(&start);
  return (total / n) * n / dt;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  CUdevice dev;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  memset(&desc, 0, sizeof desc);
  desc.location = prop.location;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  static const int threads[] = {1, 8};
  for (int r = 0; r < reps; r++)
    for (int cycle = 0; cycle < 2; cycle++)
      for (int k = 0; k < 2; k++)
        printf("placement %s %d %.0f\n", cycle ? "cycle" : "reserve-free", threads[k],
               run(cycle, threads[k], cycle ? 8000 : 80000));
  CK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
