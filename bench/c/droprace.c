// droprace: which concurrent reference drops on one allocation corrupt the CUDA driver?
//
// Pairs of threads share an allocation; a barrier starts both drops of a step at once. Each
// mode runs in a child process and prints "ok" or the signal that killed it.
//
//	gcc -O2 -I/usr/local/cuda/include bench/c/droprace.c -o droprace -lcuda -lpthread
//	./droprace PAIRS ROUNDS        # e.g. ./droprace 8 4000
//
// On an H100 with driver 580.159.04, modes F (two unmaps at once, one of which frees the
// allocation) and G (the last unmap and the last release at once) die with SIGSEGV or a
// glibc heap abort; A to E and H run clean. cu serializes exactly those drops (cu/mappings.go).
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int mode, rounds;
static CUmemAllocationProp prop;
static const size_t G = 2 << 20;
#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "mode %c: %s:%d: %d\n", 'A' + mode, #x, __LINE__, r_); exit(3); } } while (0)
typedef struct { pthread_barrier_t b; CUmemGenericAllocationHandle h; CUdeviceptr va[3]; } pair;
#define SYNC pthread_barrier_wait(&p->b)

static void *run(void *arg) {
	pair *p = (pair *)((long)arg & ~1L); int y = (long)arg & 1;
	CUmemGenericAllocationHandle r;
	for (int i = 0; i < rounds; i++) {
		if (!y) CK(cuMemCreate(&p->h, G, &prop, 0));
		SYNC;
		CUmemGenericAllocationHandle h = p->h;
		switch (mode) {
		case 0: // A: three mappings, handle released; two unmaps at once, neither the last
			if (!y) { CK(cuMemMap(p->va[0], G, 0, h, 0)); CK(cuMemMap(p->va[1], G, 0, h, 0)); CK(cuMemMap(p->va[2], G, 0, h, 0)); CK(cuMemRelease(h)); }
			SYNC; CK(cuMemUnmap(p->va[y], G)); SYNC; if (!y) CK(cuMemUnmap(p->va[2], G)); break;
		case 1: // B: three references, one mapping; two releases at once, neither the last
			if (!y) { CK(cuMemMap(p->va[0], G, 0, h, 0)); CK(cuMemRetainAllocationHandle(&r, (void *)p->va[0])); CK(cuMemRetainAllocationHandle(&r, (void *)p->va[0])); }
			SYNC; CK(cuMemRelease(h)); SYNC; if (!y) { CK(cuMemRelease(h)); CK(cuMemUnmap(p->va[0], G)); } break;
		case 2: // C: two references, one mapping; both released at once (the mapping keeps it)
			if (!y) { CK(cuMemMap(p->va[0], G, 0, h, 0)); CK(cuMemRetainAllocationHandle(&r, (void *)p->va[0])); }
			SYNC; CK(cuMemRelease(h)); SYNC; if (!y) CK(cuMemUnmap(p->va[0], G)); break;
		case 3: // D: one reference, two mappings; the last release and an unmap (not the last) at once
			if (!y) { CK(cuMemMap(p->va[0], G, 0, h, 0)); CK(cuMemMap(p->va[1], G, 0, h, 0)); }
			SYNC; if (!y) CK(cuMemRelease(h)); else CK(cuMemUnmap(p->va[1], G)); SYNC; if (!y) CK(cuMemUnmap(p->va[0], G)); break;
		case 4: // E: two references, no mapping; both released at once (the second frees)
			if (!y) { CK(cuMemMap(p->va[0], G, 0, h, 0)); CK(cuMemRetainAllocationHandle(&r, (void *)p->va[0])); CK(cuMemUnmap(p->va[0], G)); }
			SYNC; CK(cuMemRelease(h)); break;
		case 5: // F: no reference, two mappings; both unmapped at once (the second frees)
			if (!y) { CK(cuMemMap(p->va[0], G, 0, h, 0)); CK(cuMemMap(p->va[1], G, 0, h, 0)); CK(cuMemRelease(h)); }
			SYNC; CK(cuMemUnmap(p->va[y], G)); break;
		case 6: // G: one reference, one mapping; the last release and the last unmap at once
			if (!y) CK(cuMemMap(p->va[0], G, 0, h, 0));
			SYNC; if (!y) CK(cuMemUnmap(p->va[0], G)); else CK(cuMemRelease(h)); break;
		case 7: // H: one reference, two mappings of which one is unmapped at once with another
		        // allocation's last release (different allocations: the control)
			if (!y) { CK(cuMemMap(p->va[0], G, 0, h, 0)); }
			SYNC; if (!y) CK(cuMemUnmap(p->va[0], G)); else { CUmemGenericAllocationHandle o; CK(cuMemCreate(&o, G, &prop, 0)); CK(cuMemRelease(o)); }
			SYNC; if (!y) CK(cuMemRelease(h)); break;
		}
		SYNC;
	}
	return 0;
}

int main(int argc, char **argv) {
	int pairs = atoi(argv[1]); rounds = atoi(argv[2]);
	for (mode = 0; mode < 8; mode++) {
		pid_t pid = fork();
		if (pid == 0) {
			CK(cuInit(0));
			CUdevice d; CUcontext c; CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&c, d));
			memset(&prop, 0, sizeof prop); prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
			pthread_t t[128]; pair *ps = aligned_alloc(64, sizeof(pair) * pairs + 64);
			for (int i = 0; i < pairs; i++) {
				pthread_barrier_init(&ps[i].b, 0, 2);
				for (int k = 0; k < 3; k++) CK(cuMemAddressReserve(&ps[i].va[k], G, 0, 0, 0));
				pthread_create(&t[2 * i], 0, run, (void *)(long)&ps[i]);
				pthread_create(&t[2 * i + 1], 0, run, (void *)((long)&ps[i] | 1));
			}
			for (int i = 0; i < 2 * pairs; i++) pthread_join(t[i], 0);
			printf("mode %c: %d pairs x %d rounds ok\n", 'A' + mode, pairs, rounds);
			exit(0);
		}
		int st; waitpid(pid, &st, 0);
		if (WIFSIGNALED(st)) printf("mode %c: killed by signal %d\n", 'A' + mode, WTERMSIG(st));
		else if (WEXITSTATUS(st)) printf("mode %c: exit %d\n", 'A' + mode, WEXITSTATUS(st));
		fflush(stdout);
	}
	return 0;
}
