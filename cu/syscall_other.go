//go:build !(linux && (amd64 || arm64)) || cuvmm_purego

package cu

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// syscall6 is purego.SyscallN on the platforms without the assembly trampoline
// (windows/amd64, darwin, other linux architectures), and everywhere under the build tag
// cuvmm_purego, which the tests use to run this path on linux too. It allocates, but it follows the
// same memory rule as the fast path (see syscall.go): the callers already hold the
// pointees on the heap and alive, so purego's own //go:uintptrescapes adds nothing here.
func syscall6(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, a1, a2, a3, a4, a5, a6)
	return r
}

// invoke calls f.fn with f's arguments through purego.SyscallN. purego may grow the stack
// before the call enters C, so the addresses of f's scratch cannot be taken while f is on
// the stack: the frame is copied to the heap for the call and back after it.
func (f *frame) invoke() uintptr {
	h := heapFrame()
	*h = *f
	base := uintptr(unsafe.Pointer(h))
	var a [maxSyscallArgs]uintptr
	for i := range a {
		a[i] = h.a[i]
		if h.rel&(1<<i) != 0 {
			a[i] += base
		}
	}
	r, _, _ := purego.SyscallN(h.fn, a[0], a[1], a[2], a[3], a[4], a[5])
	runtime.KeepAlive(h)
	*f = *h
	return r
}

// heapFrame returns a new frame on the heap. It must not be inlined: the compiler would
// then see that the frame does not escape invoke and place it on the stack, which
// purego.SyscallN may move after its addresses were taken (TestFrameStress caught that).
//
//go:noinline
func heapFrame() *frame { return new(frame) }

// fastPath reports which syscall6 this build has: purego.SyscallN.
const fastPath = false
