package cgo

/*
#cgo LDFLAGS: -ldl -lpthread
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// The concurrency comparison (BenchmarkConcurrency): N C threads running the workload on
// the driver directly, and one-call wrappers for N goroutines doing the same through cgo.

typedef unsigned long long u64;
typedef int (*cc_reserve_t)(u64 *, size_t, size_t, u64, u64);
typedef int (*cc_free_t)(u64, size_t);
typedef int (*cc_create_t)(u64 *, size_t, const void *, u64);
typedef int (*cc_release_t)(u64);
typedef int (*cc_map_t)(u64, size_t, size_t, u64, u64);
typedef int (*cc_unmap_t)(u64, size_t);
typedef int (*cc_access_t)(u64, size_t, const void *, size_t);
typedef int (*cc_props_t)(void *, u64);
typedef int (*cc_export_t)(void *, u64, int, u64);

static cc_reserve_t cc_reserve;
static cc_free_t cc_free;
static cc_create_t cc_create;
static cc_release_t cc_release;
static cc_map_t cc_map;
static cc_unmap_t cc_unmap;
static cc_access_t cc_access;
static cc_props_t cc_props;
static cc_export_t cc_export;

static int cc_load(void) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) return -1;
	cc_reserve = (cc_reserve_t)dlsym(h, "cuMemAddressReserve");
	cc_free = (cc_free_t)dlsym(h, "cuMemAddressFree");
	cc_create = (cc_create_t)dlsym(h, "cuMemCreate");
	cc_release = (cc_release_t)dlsym(h, "cuMemRelease");
	cc_map = (cc_map_t)dlsym(h, "cuMemMap");
	cc_unmap = (cc_unmap_t)dlsym(h, "cuMemUnmap");
	cc_access = (cc_access_t)dlsym(h, "cuMemSetAccess");
	cc_props = (cc_props_t)dlsym(h, "cuMemGetAllocationPropertiesFromHandle");
	cc_export = (cc_export_t)dlsym(h, "cuMemExportToShareableHandle");
	if (!cc_reserve || !cc_free || !cc_create || !cc_release || !cc_map || !cc_unmap ||
	    !cc_access || !cc_props || !cc_export) return -2;
	return 0;
}

// CUmemAllocationProp (32 bytes): pinned memory of dev, shareable as a POSIX descriptor
// when posix is set; CUmemAccessDesc (12 bytes): read-write for dev.
static void cc_prop(unsigned char *p, int dev, int posix) {
	memset(p, 0, 32);
	p[0] = 1;
	if (posix) p[4] = 1;
	p[8] = 1;
	memcpy(p + 12, &dev, 4);
}
static void cc_desc(unsigned char *d, int dev) {
	memset(d, 0, 12);
	d[0] = 1;
	memcpy(d + 4, &dev, 4);
	d[8] = 3;
}

static long long cc_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }

// One worker of a run. own: create, map, set access, unmap and release its own chunks,
// rounds times. Otherwise (shared): map each of the shared handles into its own range,
// query it, export it (closing the descriptor) and unmap it, rounds times.
typedef struct {
	int dev, own, rounds, chunks;
	size_t size;
	const u64 *shared;
	int nshared, first;
	pthread_barrier_t *start;
	long long ops;
	int err;
} cc_worker;

static void cc_work(cc_worker *w) {
	unsigned char prop[32], desc[12], got[32];
	u64 va, hs[64];
	int r = 0;
	cc_prop(prop, w->dev, 0);
	cc_desc(desc, w->dev);
	if (w->chunks > 64) { w->err = -3; pthread_barrier_wait(w->start); return; }
	r = cc_reserve(&va, w->size * w->chunks, 0, 0, 0);
	pthread_barrier_wait(w->start);
	if (r) { w->err = r; return; }
	for (int k = 0; k < w->rounds && !r; k++) {
		if (w->own) {
			for (int i = 0; i < w->chunks && !r; i++) r = cc_create(&hs[i], w->size, prop, 0);
			for (int i = 0; i < w->chunks && !r; i++) r = cc_map(va + i * w->size, w->size, 0, hs[i], 0);
			for (int i = 0; i < w->chunks && !r; i++) r = cc_access(va + i * w->size, w->size, desc, 1);
			for (int i = 0; i < w->chunks && !r; i++) r = cc_unmap(va + i * w->size, w->size);
			for (int i = 0; i < w->chunks && !r; i++) r = cc_release(hs[i]);
			if (!r) w->ops += 5LL * w->chunks;
		} else {
			for (int i = 0; i < w->chunks && !r; i++) {
				u64 h = w->shared[(w->first + i) % w->nshared];
				int fd = -1;
				if ((r = cc_map(va + i * w->size, w->size, 0, h, 0))) break;
				if ((r = cc_props(got, h))) break;
				if ((r = cc_export(&fd, h, 1, 0))) break;
				close(fd);
				if ((r = cc_unmap(va + i * w->size, w->size))) break;
				w->ops += 4;
			}
		}
	}
	w->err = r;
	cc_free(va, w->size * w->chunks);
}

// cc_team is one run's workers and their start barrier (the workers and the caller meet
// there once every worker has reserved its range), with its own copy of the shared handles.
typedef struct {
	pthread_barrier_t start;
	int n;
	u64 *shared;
	cc_worker w[64];
} cc_team;

// cc_team_new sets up n workers (at most 64); worker i uses device i % ndev, and in the
// shared mode even workers use the shared handles and odd ones their own.
static cc_team *cc_team_new(int n, int ndev, int shared, int rounds, int chunks, size_t size,
	const u64 *hs, int nshared) {
	if (n > 64 || n < 1) return 0;
	cc_team *t = calloc(1, sizeof *t);
	if (!t) return 0;
	t->shared = calloc(nshared > 0 ? nshared : 1, sizeof(u64));
	if (!t->shared) { free(t); return 0; }
	if (nshared > 0) memcpy(t->shared, hs, nshared * sizeof(u64));
	t->n = n;
	pthread_barrier_init(&t->start, 0, n + 1);
	for (int i = 0; i < n; i++) {
		t->w[i] = (cc_worker){.dev = i % ndev, .own = !shared || i % 2 == 1, .rounds = rounds,
			.chunks = chunks, .size = size, .shared = t->shared, .nshared = nshared, .first = i,
			.start = &t->start};
	}
	return t;
}

// cc_team_work runs worker i on the calling thread; cc_team_start waits for every worker
// to be ready and lets them go.
static void cc_team_work(cc_team *t, int i) { cc_work(&t->w[i]); }
static void cc_team_start(cc_team *t) { pthread_barrier_wait(&t->start); }

// cc_team_end frees t once its workers have returned, and gives their operations and the
// first CUresult any of them got.
static int cc_team_end(cc_team *t, long long *ops) {
	int err = 0;
	*ops = 0;
	for (int i = 0; i < t->n; i++) { *ops += t->w[i].ops; if (t->w[i].err && !err) err = t->w[i].err; }
	pthread_barrier_destroy(&t->start);
	free(t->shared);
	free(t);
	return err;
}

static void *cc_thread(void *arg) { cc_worker *w = arg; cc_work(w); return 0; }

// cc_run runs a team on threads of its own and returns the ns from their common start to
// the last one's end, and the operations done, or a CUresult.
static int cc_run(int n, int ndev, int shared, int rounds, int chunks, size_t size,
	const u64 *hs, int nshared, long long *ns, long long *ops) {
	pthread_t th[64];
	cc_team *t = cc_team_new(n, ndev, shared, rounds, chunks, size, hs, nshared);
	if (!t) return -3;
	for (int i = 0; i < n; i++) pthread_create(&th[i], 0, cc_thread, &t->w[i]);
	cc_team_start(t);
	long long t0 = cc_now();
	for (int i = 0; i < n; i++) pthread_join(th[i], 0);
	*ns = cc_now() - t0;
	return cc_team_end(t, ops);
}

// The shared handles of the C and cgo ways: n allocations of device 0, exportable.
static int cc_shared(u64 *hs, int n, size_t size) {
	unsigned char prop[32];
	cc_prop(prop, 0, 1);
	for (int i = 0; i < n; i++) { int r = cc_create(&hs[i], size, prop, 0); if (r) return r; }
	return 0;
}
static void cc_unshare(u64 *hs, int n) { for (int i = 0; i < n; i++) cc_release(hs[i]); }

// One driver call per cgo call, for the cgo binding; each goroutine passes its own
// properties and descriptor.
static int cc_op_reserve(u64 *va, size_t size) { return cc_reserve(va, size, 0, 0, 0); }
static int cc_op_free(u64 va, size_t size) { return cc_free(va, size); }
static int cc_op_create(u64 *h, size_t size, int dev) { unsigned char p[32]; cc_prop(p, dev, 0); return cc_create(h, size, p, 0); }
static int cc_op_release(u64 h) { return cc_release(h); }
static int cc_op_map(u64 va, size_t size, u64 h) { return cc_map(va, size, 0, h, 0); }
static int cc_op_unmap(u64 va, size_t size) { return cc_unmap(va, size); }
static int cc_op_access(u64 va, size_t size, int dev) { unsigned char d[12]; cc_desc(d, dev); return cc_access(va, size, d, 1); }
static int cc_op_props(u64 h) { unsigned char got[32]; return cc_props(got, h); }
static int cc_op_export(u64 h, int *fd) { return cc_export(fd, h, 1, 0); }
*/
import "C"

import (
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// CCLoad resolves the driver entry points of the concurrency comparison. Load must have
// succeeded.
func CCLoad() error {
	if r := C.cc_load(); r != 0 {
		return fmt.Errorf("cgo baseline: resolve concurrency entry points: %d", int(r))
	}
	return nil
}

// Workload describes one run of the concurrency comparison.
type Workload struct {
	Workers int // at most 64
	Devices int // worker i uses device i % Devices
	// Shared: even workers map, query and export the shared handles while odd ones
	// create, map, set access, unmap and release their own chunks; otherwise every worker
	// works on its own chunks.
	Shared bool
	Rounds int
	Chunks int // per worker, at most 64
	Size   uint64
}

// CRun runs the workload on C threads and returns the elapsed time from their common
// start to the last one's end and the number of driver operations done. hs are the shared
// handles (from CShare).
func CRun(w Workload, hs []uint64) (time.Duration, int64, error) {
	var ns, ops C.longlong
	var p *C.u64
	if len(hs) > 0 {
		p = (*C.u64)(unsafe.Pointer(&hs[0]))
	}
	r := C.cc_run(C.int(w.Workers), C.int(w.Devices), cbool(w.Shared), C.int(w.Rounds), C.int(w.Chunks), C.size_t(w.Size),
		p, C.int(len(hs)), &ns, &ops)
	return time.Duration(ns), int64(ops), abErr("concurrent run", r)
}

// CRunOnGoroutines runs the same C workers as CRun, each in one cgo call from a goroutine
// of its own: the driver calls are C's, the threads the Go runtime's. It tells whether
// what separates the Go bindings from C threads is in each call's way in and out of Go or
// in the threads themselves.
func CRunOnGoroutines(w Workload, hs []uint64) (time.Duration, int64, error) {
	var p *C.u64
	if len(hs) > 0 {
		p = (*C.u64)(unsafe.Pointer(&hs[0]))
	}
	t := C.cc_team_new(C.int(w.Workers), C.int(w.Devices), cbool(w.Shared), C.int(w.Rounds), C.int(w.Chunks), C.size_t(w.Size),
		p, C.int(len(hs)))
	if t == nil {
		return 0, 0, fmt.Errorf("cgo baseline: concurrent run: %d workers", w.Workers)
	}
	var done sync.WaitGroup
	for i := range w.Workers {
		done.Go(func() { C.cc_team_work(t, C.int(i)) })
	}
	C.cc_team_start(t)
	t0 := time.Now()
	done.Wait()
	d := time.Since(t0)
	var ops C.longlong
	r := C.cc_team_end(t, &ops)
	return d, int64(ops), abErr("concurrent run", r)
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// CShare creates n exportable allocations of size bytes on device 0 for the shared
// workload of the C and cgo ways; CUnshare releases them.
func CShare(n int, size uint64) ([]uint64, error) {
	hs := make([]uint64, n)
	return hs, abErr("create shared", C.cc_shared((*C.u64)(unsafe.Pointer(&hs[0])), C.int(n), C.size_t(size)))
}

// CUnshare releases what CShare created.
func CUnshare(hs []uint64) { C.cc_unshare((*C.u64)(unsafe.Pointer(&hs[0])), C.int(len(hs))) }

// Conc is the cgo binding of the concurrency comparison: one cgo call per driver call.
type Conc struct{}

func (Conc) Reserve(size uint64) (uint64, error) {
	var va C.u64
	r := C.cc_op_reserve(&va, C.size_t(size))
	return uint64(va), abErr("reserve", r)
}
func (Conc) Free(va, size uint64) error {
	return abErr("free", C.cc_op_free(C.u64(va), C.size_t(size)))
}
func (Conc) Create(size uint64, dev int) (uint64, error) {
	var h C.u64
	r := C.cc_op_create(&h, C.size_t(size), C.int(dev))
	return uint64(h), abErr("create", r)
}
func (Conc) Release(h uint64) error { return abErr("release", C.cc_op_release(C.u64(h))) }
func (Conc) Map(va, size, h uint64) error {
	return abErr("map", C.cc_op_map(C.u64(va), C.size_t(size), C.u64(h)))
}
func (Conc) Unmap(va, size uint64) error {
	return abErr("unmap", C.cc_op_unmap(C.u64(va), C.size_t(size)))
}
func (Conc) SetAccess(va, size uint64, dev int) error {
	return abErr("setaccess", C.cc_op_access(C.u64(va), C.size_t(size), C.int(dev)))
}
func (Conc) Properties(h uint64) error { return abErr("properties", C.cc_op_props(C.u64(h))) }
func (Conc) ExportFD(h uint64) (int, error) {
	var fd C.int
	r := C.cc_op_export(C.u64(h), &fd)
	return int(fd), abErr("export", r)
}
