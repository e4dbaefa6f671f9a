//go:build linux || windows

package loader

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// getPA is the address of a loaded driver's cuGetProcAddress_v2; the system sources embed
// it.
type getPA uintptr

// getProcAddress calls
//
//	CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
//	                             cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
//
// Resolution is rare (once per symbol), so the allocations here do not matter.
func (g getPA) getProcAddress(name string, version int, flags uint64) (uintptr, int32, int32) {
	cname := append([]byte(name), 0)
	var pfn uintptr
	var status int32
	r, _, _ := purego.SyscallN(uintptr(g),
		uintptr(unsafe.Pointer(&cname[0])),
		uintptr(unsafe.Pointer(&pfn)),
		uintptr(version),
		uintptr(flags),
		uintptr(unsafe.Pointer(&status)))
	runtime.KeepAlive(cname)
	return pfn, int32(uint32(r)), status
}
