package cgo

/*
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

// The VMM operations for the interleaved comparison (BenchmarkOpsAB): C loops that make
// every driver call and clock read in C, and one-call wrappers for a cgo binding that
// crosses from Go into C once per operation.

typedef unsigned long long u64;
typedef int (*ab_reserve_t)(u64 *, size_t, size_t, u64, u64);
typedef int (*ab_free_t)(u64, size_t);
typedef int (*ab_create_t)(u64 *, size_t, const void *, u64);
typedef int (*ab_release_t)(u64);
typedef int (*ab_map_t)(u64, size_t, size_t, u64, u64);
typedef int (*ab_unmap_t)(u64, size_t);
typedef int (*ab_access_t)(u64, size_t, const void *, size_t);

static ab_reserve_t ab_reserve;
static ab_free_t ab_free;
static ab_create_t ab_create;
static ab_release_t ab_release;
static ab_map_t ab_map;
static ab_unmap_t ab_unmap;
static ab_access_t ab_access;
static unsigned char ab_prop[32]; // CUmemAllocationProp: pinned, device 0
static unsigned char ab_desc[12]; // CUmemAccessDesc: device 0, read-write

static int ab_load(void) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) return -1;
	ab_reserve = (ab_reserve_t)dlsym(h, "cuMemAddressReserve");
	ab_free = (ab_free_t)dlsym(h, "cuMemAddressFree");
	ab_create = (ab_create_t)dlsym(h, "cuMemCreate");
	ab_release = (ab_release_t)dlsym(h, "cuMemRelease");
	ab_map = (ab_map_t)dlsym(h, "cuMemMap");
	ab_unmap = (ab_unmap_t)dlsym(h, "cuMemUnmap");
	ab_access = (ab_access_t)dlsym(h, "cuMemSetAccess");
	if (!ab_reserve || !ab_free || !ab_create || !ab_release || !ab_map || !ab_unmap || !ab_access) return -2;
	memset(ab_prop, 0, sizeof ab_prop);
	ab_prop[0] = 1; // type PINNED
	ab_prop[8] = 1; // location DEVICE 0
	memset(ab_desc, 0, sizeof ab_desc);
	ab_desc[0] = 1; // location DEVICE 0
	ab_desc[8] = 3; // PROT_READWRITE
	return 0;
}

static long long ab_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }

// One cycle of bench/c/callcost.c: ns of create, map, set access, unmap and release in t.
static int ab_cycle(size_t size, long long *t) {
	u64 va, h; int r;
	if ((r = ab_reserve(&va, size, 0, 0, 0))) return r;
	long long a0 = ab_now(); if ((r = ab_create(&h, size, ab_prop, 0))) return r;
	long long a1 = ab_now(); if ((r = ab_map(va, size, 0, h, 0))) return r;
	long long a2 = ab_now(); if ((r = ab_access(va, size, ab_desc, 1))) return r;
	long long a3 = ab_now(); if ((r = ab_unmap(va, size))) return r;
	long long a4 = ab_now(); if ((r = ab_release(h))) return r;
	long long a5 = ab_now(); if ((r = ab_free(va, size))) return r;
	t[0] = a1 - a0; t[1] = a2 - a1; t[2] = a3 - a2; t[3] = a4 - a3; t[4] = a5 - a4;
	return 0;
}

// One batch: k chunks (k <= 512) created, mapped into one reservation, given access,
// unmapped and released, each phase timed as a whole; ns of each phase in t.
static int ab_batch(size_t size, int k, long long *t) {
	u64 va, hs[512]; int r;
	if (k > 512) return -3;
	if ((r = ab_reserve(&va, size * k, 0, 0, 0))) return r;
	long long a0 = ab_now(); for (int i = 0; i < k; i++) if ((r = ab_create(&hs[i], size, ab_prop, 0))) return r;
	long long a1 = ab_now(); for (int i = 0; i < k; i++) if ((r = ab_map(va + i * size, size, 0, hs[i], 0))) return r;
	long long a2 = ab_now(); for (int i = 0; i < k; i++) if ((r = ab_access(va + i * size, size, ab_desc, 1))) return r;
	long long a3 = ab_now(); for (int i = 0; i < k; i++) if ((r = ab_unmap(va + i * size, size))) return r;
	long long a4 = ab_now(); for (int i = 0; i < k; i++) if ((r = ab_release(hs[i]))) return r;
	long long a5 = ab_now(); if ((r = ab_free(va, size * k))) return r;
	t[0] = a1 - a0; t[1] = a2 - a1; t[2] = a3 - a2; t[3] = a4 - a3; t[4] = a5 - a4;
	return 0;
}

// One driver call per cgo call, for the cgo binding.
static int ab_op_reserve(u64 *va, size_t size) { return ab_reserve(va, size, 0, 0, 0); }
static int ab_op_free(u64 va, size_t size) { return ab_free(va, size); }
static int ab_op_create(u64 *h, size_t size) { return ab_create(h, size, ab_prop, 0); }
static int ab_op_release(u64 h) { return ab_release(h); }
static int ab_op_map(u64 va, size_t size, u64 h) { return ab_map(va, size, 0, h, 0); }
static int ab_op_unmap(u64 va, size_t size) { return ab_unmap(va, size); }
static int ab_op_access(u64 va, size_t size) { return ab_access(va, size, ab_desc, 1); }

// The same, each timed in C around the driver call alone (the diagnosis of where a Go
// caller's extra time goes: inside the driver, or in crossing into it).
static long long ab_dt;
static int ab_opt_create(u64 *h, size_t size) { long long a = ab_now(); int r = ab_create(h, size, ab_prop, 0); ab_dt = ab_now() - a; return r; }
static int ab_opt_release(u64 h) { long long a = ab_now(); int r = ab_release(h); ab_dt = ab_now() - a; return r; }
static int ab_opt_map(u64 va, size_t size, u64 h) { long long a = ab_now(); int r = ab_map(va, size, 0, h, 0); ab_dt = ab_now() - a; return r; }
static int ab_opt_unmap(u64 va, size_t size) { long long a = ab_now(); int r = ab_unmap(va, size); ab_dt = ab_now() - a; return r; }
static int ab_opt_access(u64 va, size_t size) { long long a = ab_now(); int r = ab_access(va, size, ab_desc, 1); ab_dt = ab_now() - a; return r; }
static long long ab_last(void) { return ab_dt; }

// vmm/kv's page-index commit (BenchmarkKVCommitAB), as bench/c/kvcommit.c makes it: per
// plane create, map at planes[i]+off, set access, release; ns of the whole in *t.
static int ab_kv_commit(const u64 *planes, int n, size_t page, size_t off, long long *t) {
	long long a0 = ab_now();
	for (int i = 0; i < n; i++) {
		u64 h; int r;
		if ((r = ab_create(&h, page, ab_prop, 0))) return r;
		if ((r = ab_map(planes[i] + off, page, 0, h, 0))) return r;
		if ((r = ab_access(planes[i] + off, page, ab_desc, 1))) return r;
		if ((r = ab_release(h))) return r;
	}
	*t = ab_now() - a0;
	return 0;
}
*/
import "C"

import "fmt"

// Phases are the five timed operations, in order.
var Phases = [5]string{"create", "map", "setaccess", "unmap", "release"}

// ABLoad resolves the driver entry points of the C side. Load must have succeeded.
func ABLoad() error {
	if r := C.ab_load(); r != 0 {
		return fmt.Errorf("cgo baseline: resolve VMM entry points: %d", int(r))
	}
	return nil
}

func abErr(op string, r C.int) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("cgo baseline: %s: CUresult %d", op, int(r))
}

// CCycle runs one create, map, set access, unmap, release cycle of size bytes in C and
// returns the ns of each operation.
func CCycle(size uint64) ([5]int64, error) {
	var t [5]C.longlong
	err := abErr("cycle", C.ab_cycle(C.size_t(size), &t[0]))
	return [5]int64{int64(t[0]), int64(t[1]), int64(t[2]), int64(t[3]), int64(t[4])}, err
}

// CBatch runs one batch of k chunks of size bytes in C and returns the ns of each phase.
func CBatch(size uint64, k int) ([5]int64, error) {
	var t [5]C.longlong
	err := abErr("batch", C.ab_batch(C.size_t(size), C.int(k), &t[0]))
	return [5]int64{int64(t[0]), int64(t[1]), int64(t[2]), int64(t[3]), int64(t[4])}, err
}

// Binding is a minimal cgo binding of the VMM calls: one cgo call per driver call, with
// the same properties and access descriptor as the C side.
type Binding struct{}

func (Binding) Reserve(size uint64) (uint64, error) {
	var va C.u64
	r := C.ab_op_reserve(&va, C.size_t(size))
	return uint64(va), abErr("reserve", r)
}
func (Binding) Free(va, size uint64) error {
	return abErr("free", C.ab_op_free(C.u64(va), C.size_t(size)))
}
func (Binding) Create(size uint64) (uint64, error) {
	var h C.u64
	r := C.ab_op_create(&h, C.size_t(size))
	return uint64(h), abErr("create", r)
}
func (Binding) Release(h uint64) error { return abErr("release", C.ab_op_release(C.u64(h))) }
func (Binding) Map(va, size, h uint64) error {
	return abErr("map", C.ab_op_map(C.u64(va), C.size_t(size), C.u64(h)))
}
func (Binding) Unmap(va, size uint64) error {
	return abErr("unmap", C.ab_op_unmap(C.u64(va), C.size_t(size)))
}
func (Binding) SetAccess(va, size uint64) error {
	return abErr("setaccess", C.ab_op_access(C.u64(va), C.size_t(size)))
}

// TimedBinding is Binding with each driver call timed in C; Last returns the ns of the
// last call.
type TimedBinding struct{ Binding }

func (TimedBinding) Last() int64 { return int64(C.ab_last()) }
func (TimedBinding) Create(size uint64) (uint64, error) {
	var h C.u64
	r := C.ab_opt_create(&h, C.size_t(size))
	return uint64(h), abErr("create", r)
}
func (TimedBinding) Release(h uint64) error { return abErr("release", C.ab_opt_release(C.u64(h))) }
func (TimedBinding) Map(va, size, h uint64) error {
	return abErr("map", C.ab_opt_map(C.u64(va), C.size_t(size), C.u64(h)))
}
func (TimedBinding) Unmap(va, size uint64) error {
	return abErr("unmap", C.ab_opt_unmap(C.u64(va), C.size_t(size)))
}
func (TimedBinding) SetAccess(va, size uint64) error {
	return abErr("setaccess", C.ab_opt_access(C.u64(va), C.size_t(size)))
}

// CKVCommit commits one page of page bytes at off in each of planes, from C, and returns
// the ns it took.
func CKVCommit(planes []uint64, page, off uint64) (int64, error) {
	var t C.longlong
	err := abErr("kv commit", C.ab_kv_commit((*C.u64)(&planes[0]), C.int(len(planes)), C.size_t(page), C.size_t(off), &t))
	return int64(t), err
}
