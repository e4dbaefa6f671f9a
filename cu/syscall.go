package cu

// The lean C call path.
//
// syscall6 calls the C function at fn with six integer (or pointer) arguments in the
// platform's C calling convention and returns its integer result register (RAX / X0) in
// full, all 64 bits. Callers of functions that take fewer arguments pass zeros for the
// rest: every C ABI cu runs on passes the first six integer arguments in registers (or,
// on windows/amd64, in registers and caller-owned stack slots), so a callee never sees
// the extra ones. No driver call cu makes has more than six integer arguments, and none
// takes or returns a floating-point value; syscall6 does not support either.
//
// It has two implementations:
//
//   - linux/amd64 and linux/arm64 (syscall_fast.go and the syscall_linux_*.s trampolines):
//     the arguments go into a small struct on the caller's stack, which runtime.cgocall
//     hands to an assembly trampoline on the system stack. Nothing is allocated and nothing
//     is copied beyond the seven words.
//   - everywhere else (syscall_other.go): purego.SyscallN.
//
// # The memory rule
//
// syscall6 (and cu's call, built on it) is not //go:uintptrescapes: the compiler is not
// told that its uintptr arguments may be pointers, so it neither moves their pointees to
// the heap nor keeps them alive. A pointer passed as an argument must therefore point to
// memory that cannot move or be freed before the call returns:
//
//   - heap objects the caller keeps reachable across the call, such as pooled scratch from
//     getOut (reachable until putOut) or C memory. The Go heap never moves objects.
//   - NOT stack variables, nor anything the compiler is free to place on the stack: a
//     local whose address is taken, a non-escaping make or new, a caller's slice whose
//     backing array may live in the caller's frame. A goroutine stack is copied when it
//     grows (or shrinks during a GC), which can happen after the uintptr was taken and
//     before the call enters C; the uintptr would then point into the old, freed stack.
//
// Pointers into memory cu does not own (user slices, results built with new) go through
// callKeep instead, which is //go:uintptrescapes and so forces the pointees to the heap
// and keeps them alive for the call.
//
// The arguments struct itself does live on the stack; syscall_fast.go explains why that
// one is safe.

// maxSyscallArgs is the most integer arguments syscall6 passes.
const maxSyscallArgs = 6

// Both implementations must have this signature.
var _ func(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr = syscall6

// syscallN calls fn with args (at most maxSyscallArgs of them, zero-padded) through
// syscall6 and returns the result register. args is only read, so a variadic caller's
// backing array stays on its stack.
func syscallN(fn uintptr, args []uintptr) uintptr {
	var a [maxSyscallArgs]uintptr
	if len(args) > len(a) {
		panic("cu: driver call with more than 6 arguments")
	}
	copy(a[:], args)
	return syscall6(fn, a[0], a[1], a[2], a[3], a[4], a[5])
}
