//go:build linux && (amd64 || arm64) && !cuvmm_purego

package cu

import (
	"unsafe"

	// purego must stay linked: with CGO_ENABLED=0 it pulls in its internal/fakecgo, which
	// sets runtime.iscgo and the _cgo_* hooks (thread start, TLS setup) that make
	// runtime.cgocall usable without cgo; with cgo enabled it pulls in runtime/cgo. cu
	// uses purego elsewhere too (the loader), but the trampoline depends on it directly.
	_ "github.com/ebitengine/purego"
)

// syscall6ABI0 is the entry address of the assembly trampoline syscall6trampoline<>, set
// by a DATA directive in syscall_linux_$GOARCH.s. A Go func value would name the ABIInternal
// wrapper; runtime.cgocall needs the raw C-ABI entry.
var syscall6ABI0 uintptr

// runtime_cgocall is runtime.cgocall (on the runtime's linkname allow list because purego
// uses it). It switches to the system stack (g0), marks the goroutine as in a system call
// and calls fn(arg) with the C calling convention: arg in DI on amd64, R0 on arm64.
//
// It is declared noescape so that the caller's syscall6Args stays on its stack: cgocall
// only passes arg to the noescape asmcgocall and KeepAlives it, and returns before the
// caller's frame is gone.
//
//go:linkname runtime_cgocall runtime.cgocall
//go:noescape
func runtime_cgocall(fn uintptr, arg unsafe.Pointer) int32

// syscall6 calls fn(a1, ..., a6) through the trampoline and returns the full result
// register. See syscall.go for the rule on pointer arguments.
//
// Why the arguments struct may live on this goroutine's stack:
//
//   - Until runtime.cgocall has entered the system call, the stack may still be copied
//     (grow in a prologue, shrink in a GC). The struct's address is passed as an
//     unsafe.Pointer, so a stack copy adjusts it like any other pointer into the stack;
//     it is never held as a bare uintptr. The a1..a6 values are plain integers to the
//     runtime and are copied unchanged: that is why they must not point into the stack.
//   - runtime.cgocall is nosplit and calls entersyscall before asmcgocall. From then on
//     until exitsyscall the goroutine is in the _Gsyscall state: it runs no Go code, so its
//     stack cannot grow, and the GC does not shrink (move) the stack of a goroutine in a
//     system call. The trampoline, running on the system stack, can read the struct and
//     write r1 back through the pointer.
//   - The struct holds no Go pointers (all uintptr), so the GC may scan this frame while
//     the trampoline writes r1 without seeing anything to follow.
//
// No allocation happens: args is a stack local, and cgocall and asmcgocall allocate nothing.
func syscall6(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr {
	// Fields are assigned one by one: a composite literal here is built in a temporary
	// and block-copied with 16-byte moves right after 8-byte stores, a store-forwarding
	// stall that cost about 7 ns a call on amd64.
	var args syscall6Args
	args.fn, args.a[0], args.a[1], args.a[2], args.a[3], args.a[4], args.a[5] = fn, a1, a2, a3, a4, a5, a6
	runtime_cgocall(syscall6ABI0, unsafe.Pointer(&args))
	return args.r1
}

// invoke calls f.fn with f's arguments through the trampoline, which turns the arguments
// marked in f.rel into addresses inside f, and returns the full result register. The frame
// may live on the stack for the reasons syscall6 gives; the addresses are formed only
// once the goroutine is in the system call.
func (f *frame) invoke() uintptr {
	runtime_cgocall(syscall6ABI0, unsafe.Pointer(&f.syscall6Args))
	return f.r1
}

// fastPath reports which syscall6 this build has: the trampoline.
const fastPath = true
