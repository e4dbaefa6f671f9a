//go:build linux && amd64 && !cuvmm_purego

#include "textflag.h"
#include "go_asm.h"

// syscall6ABI0 holds the trampoline's entry address (see syscall_fast.go).
GLOBL ·syscall6ABI0(SB), NOPTR|RODATA, $8
DATA ·syscall6ABI0(SB)/8, $syscall6trampoline<>(SB)

// syscall6trampoline<> is called by runtime.asmcgocall on the system stack, as a C
// function (System V AMD64 ABI): DI = *syscall6Args. It calls args.fn(args.a[0], ...,
// args.a[5]) and stores the integer result (RAX) in args.r1. Each argument whose bit is set
// in args.rel is an offset from the start of args (into the frame that holds it, see
// frame.go) and is passed as that address: only here, with the goroutine in the system
// call, is its stack guaranteed not to move.
//
// NOFRAME: for a frame size of zero with a CALL inside, the Go assembler would insert its
// own PUSHQ BP / MOVQ SP, BP prologue; with NOFRAME it inserts nothing, so the frame below
// is exactly what is written here.
//
// Stack: asmcgocall aligns SP to 16 bytes before its CALL, so SP = 8 (mod 16) on entry
// (the return address). PUSHQ BP makes it 0 (mod 16), and SUBQ $16 keeps it so: SP is
// 16-byte aligned at our CALL, as the ABI requires.
//
// Registers: only caller-saved registers are used (AX, CX, DX, SI, DI, R8-R11); BP is
// saved and restored (it also links a frame record for unwinders). BX, R12-R15 (and so the
// Go g register R14) are callee-saved in C and preserved by fn. The args pointer is kept in
// our frame, not in a register, across the call. AL = 0 tells a variadic callee that no
// vector registers carry arguments (no cu call has float arguments).
TEXT syscall6trampoline<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	MOVQ  SP, BP
	SUBQ  $16, SP
	MOVQ  DI, 0(SP)              // keep *syscall6Args across the call
	MOVQ  DI, R11

	MOVQ syscall6Args_rel(R11), AX
	MOVQ syscall6Args_fn(R11), R10
	MOVQ (syscall6Args_a+0)(R11), DI
	MOVQ (syscall6Args_a+8)(R11), SI
	MOVQ (syscall6Args_a+16)(R11), DX
	MOVQ (syscall6Args_a+24)(R11), CX
	MOVQ (syscall6Args_a+32)(R11), R8
	MOVQ (syscall6Args_a+40)(R11), R9
	TESTQ AX, AX
	JEQ  call                    // no offsets: the common case, straight to the call
	BTQ  $0, AX
	JCC  2(PC)
	ADDQ R11, DI
	BTQ  $1, AX
	JCC  2(PC)
	ADDQ R11, SI
	BTQ  $2, AX
	JCC  2(PC)
	ADDQ R11, DX
	BTQ  $3, AX
	JCC  2(PC)
	ADDQ R11, CX
	BTQ  $4, AX
	JCC  2(PC)
	ADDQ R11, R8
	BTQ  $5, AX
	JCC  2(PC)
	ADDQ R11, R9
call:
	XORL AX, AX                  // varargs: no vector registers used
	CALL R10

	MOVQ 0(SP), R11
	MOVQ AX, syscall6Args_r1(R11)

	ADDQ $16, SP
	POPQ BP
	RET
