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
// Driver calls are made from a frame (frame.go): the entry point, the arguments, and
// scratch memory for what pointer arguments point to, all on the caller's stack. It has two
// implementations:
//
//   - linux/amd64 and linux/arm64 (syscall_fast.go and the syscall_linux_*.s trampolines):
//     runtime.cgocall hands the frame to an assembly trampoline on the system stack, which
//     turns the frame-relative arguments into addresses and calls the function. Nothing is
//     allocated.
//   - everywhere else, and under the build tag cuvmm_purego (syscall_other.go):
//     purego.SyscallN, with the frame copied to the heap for the call.
//
// # The memory rule
//
// Neither syscall6 nor a frame is //go:uintptrescapes: the compiler is not told that their
// uintptr arguments may be pointers, so it neither moves their pointees to the heap nor
// keeps them alive. A pointer passed as a plain argument value must therefore point to
// memory that cannot move or be freed before the call returns: a heap object the caller
// keeps reachable, or C memory. It must NOT point into a goroutine stack (a local whose
// address is taken, a non-escaping make or new, a caller's slice whose backing array may
// live in the caller's frame): a stack is copied when it grows or shrinks, which can happen
// after the uintptr was taken and before the call enters C.
//
// So cu passes pointers in one of two ways:
//
//   - into the frame's scratch (frame.ref): the out-parameters and the small structs a
//     call reads. The trampoline forms the address when the stack can no longer move.
//   - through callKeep, which is //go:uintptrescapes and so forces the pointees to the
//     heap and keeps them alive for the call: memory cu does not own (user slices), and
//     what does not fit a frame.

// maxSyscallArgs is the most integer arguments syscall6 passes.
const maxSyscallArgs = 6

// Both implementations of syscall6 (the frame-less form, for tests and benchmarks) must have
// this signature.
var _ func(fn, a1, a2, a3, a4, a5, a6 uintptr) uintptr = syscall6
