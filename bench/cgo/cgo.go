// Package cgo is the cgo baseline of the per-call cost benchmarks: the same driver calls as
// cu's benchmarks, made through cgo. The driver is opened with dlopen so that the package
// builds without the CUDA toolkit or libcuda on the build machine.
package cgo

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

typedef int (*fn_init)(unsigned int);
typedef int (*fn_ver)(int *);
typedef int (*fn_attr)(int *, int, int);
typedef int (*fn_gran)(size_t *, const void *, int);

static fn_init p_init;
static fn_ver p_ver;
static fn_attr p_attr;
static fn_gran p_gran;
static unsigned char prop[32];

static int load(void) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) return -1;
	p_init = (fn_init)dlsym(h, "cuInit");
	p_ver = (fn_ver)dlsym(h, "cuDriverGetVersion");
	p_attr = (fn_attr)dlsym(h, "cuDeviceGetAttribute");
	p_gran = (fn_gran)dlsym(h, "cuMemGetAllocationGranularity");
	if (!p_init || !p_ver || !p_attr || !p_gran) return -2;
	memset(prop, 0, sizeof prop);
	prop[0] = 1; // type = PINNED
	prop[8] = 1; // location.type = DEVICE, location.id = 0
	return p_init(0);
}
static int driver_version(void) { int v = 0; p_ver(&v); return v; }
static int attribute(int a, int dev) { int v = 0; p_attr(&v, a, dev); return v; }
static size_t granularity(void) { size_t g = 0; p_gran(&g, prop, 0); return g; }
*/
import "C"

import "fmt"

// Load opens the driver and calls cuInit.
func Load() error {
	if r := C.load(); r != 0 {
		return fmt.Errorf("cgo baseline: load: %d", int(r))
	}
	return nil
}

// DriverVersion calls cuDriverGetVersion.
func DriverVersion() int { return int(C.driver_version()) }

// Attribute calls cuDeviceGetAttribute.
func Attribute(a, dev int) int { return int(C.attribute(C.int(a), C.int(dev))) }

// Granularity calls cuMemGetAllocationGranularity for pinned memory of device 0.
func Granularity() uint64 { return uint64(C.granularity()) }
