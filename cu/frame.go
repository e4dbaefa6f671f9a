package cu

import (
	"unsafe"

	"github.com/cuvmm/cuvmm/loader"
)

// syscall6Args is the block a driver call is made from: the entry point, six integer
// arguments, the result register, and rel, which marks the arguments that are offsets from
// the start of this block rather than values. Its field offsets reach the assembly
// trampolines through go_asm.h (syscall6Args_fn, syscall6Args_a, ...), so the layout is not
// repeated by hand.
type syscall6Args struct {
	fn  uintptr
	a   [maxSyscallArgs]uintptr
	r1  uintptr
	rel uintptr // bit i set: a[i] is an offset from &syscall6Args; the call passes the address
}

// frameWords is the scratch memory of a frame, in 8-byte words: room for an out-parameter
// and a MemAllocationProp or MulticastObjectProp, for five access descriptors, or for a
// 64-byte fabric handle. mkcu lays out the generated calls (zcalls.go) for this size, and
// zcalls.go fails to compile if it changes without them being generated again.
const frameWords = 8

// frame is one driver call together with the memory its pointer arguments point to: the
// structs it reads and the out-parameters it writes. It lives on the calling goroutine's
// stack and allocates nothing.
//
// A pointer into a goroutine's stack must never be handed to C as a number: the stack is
// copied when it grows, and the number would then point into freed memory. So the pointer
// arguments of a frame are stored as offsets (ref), and the address is formed only by the
// assembly trampoline, on the system stack, after runtime.cgocall has entered the system
// call; from then until the call returns the goroutine runs no Go code and its stack cannot
// move. Where there is no trampoline (syscall_other.go) the frame is copied to the heap for
// the call instead. The stack, which the call touches anyway, is also the one scratch that
// is still in the caches after the driver's work (docs/benchmarks.md measures a heap pool).
type frame struct {
	syscall6Args
	scratch [frameWords]uint64
}

// scratchOffset is where scratch begins, counted from the start of syscall6Args (which is
// the first field of frame, so from the frame's start).
const scratchOffset = unsafe.Offsetof(frame{}.scratch)

// ref makes argument i the address of scratch word w at the time of the call.
func (f *frame) ref(i, w int) {
	f.rel |= 1 << i
	f.a[i] = scratchOffset + uintptr(w)*8
}

// call makes the driver call p with the frame's arguments and returns its CUresult as an
// error, like the package-level call. It is too large to be inlined itself, but Proc.Addr
// and invoke are inlined into it, so that a VMM call is one Go frame between the exported
// function and runtime.cgocall: every extra function returned through after the driver
// call runs cold. (Its allocation-free use is checked by TestSyscallNoAllocs.)
func (f *frame) call(p *loader.Proc) error {
	addr, err := p.Addr()
	if err != nil {
		return symbolErr(err)
	}
	f.fn = addr
	if r := f.invoke(); uint32(r) != 0 {
		return Result(int32(uint32(r)))
	}
	return nil
}
