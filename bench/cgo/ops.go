package cgo

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

// The VMM operation loop of bench/c/callcost.c, run inside a Go process: if it costs what
// the Go binding costs, the difference from the C program is the process (the Go runtime's
// threads and address space), not the binding.

typedef unsigned long long u64;
typedef int (*fn_reserve)(u64 *, size_t, size_t, u64, u64);
typedef int (*fn_free)(u64, size_t);
typedef int (*fn_create)(u64 *, size_t, const void *, u64);
typedef int (*fn_release)(u64);
typedef int (*fn_map)(u64, size_t, size_t, u64, u64);
typedef int (*fn_unmap)(u64, size_t);
typedef int (*fn_access)(u64, size_t, const void *, size_t);

static double opsnow(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }

// ops runs reps cycles of size bytes and writes the mean ns of create, map, set access,
// unmap and release to out[0..4]; it returns the first failing CUresult, or 0.
static int ops(size_t size, int reps, double *out) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) return -1;
	fn_reserve reserve = (fn_reserve)dlsym(h, "cuMemAddressReserve");
	fn_free afree = (fn_free)dlsym(h, "cuMemAddressFree");
	fn_create create = (fn_create)dlsym(h, "cuMemCreate");
	fn_release release = (fn_release)dlsym(h, "cuMemRelease");
	fn_map map = (fn_map)dlsym(h, "cuMemMap");
	fn_unmap unmap = (fn_unmap)dlsym(h, "cuMemUnmap");
	fn_access access = (fn_access)dlsym(h, "cuMemSetAccess");
	if (!reserve || !afree || !create || !release || !map || !unmap || !access) return -2;
	unsigned char prop[32]; memset(prop, 0, sizeof prop);
	prop[0] = 1; // type PINNED
	prop[8] = 1; // location DEVICE 0
	unsigned char desc[12]; memset(desc, 0, sizeof desc);
	desc[0] = 1;  // location DEVICE 0
	desc[8] = 3;  // PROT_READWRITE
	double t[5] = {0};
	for (int i = 0; i < reps; i++) {
		u64 va, mh; int r;
		if ((r = reserve(&va, size, 0, 0, 0))) return r;
		double a0 = opsnow(); if ((r = create(&mh, size, prop, 0))) return r;
		double a1 = opsnow(); if ((r = map(va, size, 0, mh, 0))) return r;
		double a2 = opsnow(); if ((r = access(va, size, desc, 1))) return r;
		double a3 = opsnow(); if ((r = unmap(va, size))) return r;
		double a4 = opsnow(); if ((r = release(mh))) return r;
		double a5 = opsnow(); if ((r = afree(va, size))) return r;
		t[0] += a1 - a0; t[1] += a2 - a1; t[2] += a3 - a2; t[3] += a4 - a3; t[4] += a5 - a4;
	}
	for (int k = 0; k < 5; k++) out[k] = t[k] / reps;
	return 0;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Ops runs the C operation loop in this process and returns the mean ns of create, map,
// set access, unmap and release. Load must have succeeded (it calls cuInit).
func Ops(size uint64, reps int) ([5]float64, error) {
	var out [5]C.double
	if r := C.ops(C.size_t(size), C.int(reps), (*C.double)(unsafe.Pointer(&out[0]))); r != 0 {
		return [5]float64{}, fmt.Errorf("cgo baseline: ops %d bytes: CUresult %d", size, int(r))
	}
	var res [5]float64
	for i := range out {
		res[i] = float64(out[i])
	}
	return res, nil
}
