// C baseline for checkpoint's BenchmarkGPUCheckpoint: lock, checkpoint, restore and unlock
// of process PID with the driver's calls alone (no state checks), each timed. Build on the
// GPU machine:
//   gcc -O2 -I/usr/local/cuda/include checkpoint.c -o checkpoint -lcuda
// Usage: checkpoint PID. Output: "c lock <ns> checkpoint <ns> restore <ns> unlock <ns>".
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("FAIL %s = %d at %d\n", #x, r_, __LINE__); exit(1); } } while (0)

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: checkpoint PID\n"); return 2; }
  int pid = atoi(argv[1]);
  CK(cuInit(0));
  CUcheckpointLockArgs lock; memset(&lock, 0, sizeof lock);
  CUcheckpointCheckpointArgs ck; memset(&ck, 0, sizeof ck);
  CUcheckpointRestoreArgs rs; memset(&rs, 0, sizeof rs);
  CUcheckpointUnlockArgs un; memset(&un, 0, sizeof un);
  double t[5];
  t[0] = now();
  CK(cuCheckpointProcessLock(pid, &lock));
  t[1] = now();
  CK(cuCheckpointProcessCheckpoint(pid, &ck));
  t[2] = now();
  CK(cuCheckpointProcessRestore(pid, &rs));
  t[3] = now();
  CK(cuCheckpointProcessUnlock(pid, &un));
  t[4] = now();
  printf("c lock %.0f checkpoint %.0f restore %.0f unlock %.0f\n", t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3]);
  return 0;
}
