//go:build linux && arm64 && !cuvmm_purego

#include "textflag.h"
#include "go_asm.h"

// syscall6ABI0 holds the trampoline's entry address (see syscall_fast.go).
GLOBL ·syscall6ABI0(SB), NOPTR|RODATA, $8
DATA ·syscall6ABI0(SB)/8, $syscall6trampoline<>(SB)

// syscall6trampoline<> is called by runtime.asmcgocall on the system stack, as a C
// function (AAPCS64): R0 = *syscall6Args, R30 (LR) = return address. It calls
// args.fn(args.a[0], ..., args.a[5]) in R0-R5 and stores the integer result (R0) in
// args.r1. Each argument whose bit is set in args.rel is an offset from the start of args
// (into the frame that holds it, see frame.go) and is passed as that address: only here,
// with the goroutine in the system call, is its stack guaranteed not to move.
//
// NOFRAME: a non-leaf function with a zero frame size would get a prologue inserted by the
// Go assembler (saving LR and FP in a frame it sizes itself); with NOFRAME it inserts
// nothing, so the 32-byte frame below is exactly what is written here.
//
// Stack: RSP is 16-byte aligned on entry (asmcgocall keeps it so, and AAPCS64 requires it
// at every public interface); the frame is 32 bytes, so it stays aligned at the BL.
// Frame: 0(RSP) = caller's FP (R29), 8(RSP) = LR (R30), 16(RSP) = *syscall6Args.
//
// Registers: only R0-R5 and R9-R11 (caller-saved temporaries) are used; R29 and R30 are
// saved and restored. R19-R28 (and so the Go g register R28) are callee-saved in C and
// preserved by fn. The Go assembler's temporary R27 and the platform register R18 are not
// touched. The args pointer is kept in our frame across the call.
TEXT syscall6trampoline<>(SB), NOSPLIT|NOFRAME, $0
	SUB  $32, RSP
	STP  (R29, R30), 0(RSP)      // frame record: FP, LR
	MOVD RSP, R29
	MOVD R0, 16(RSP)             // keep *syscall6Args across the call
	MOVD R0, R9

	MOVD syscall6Args_rel(R9), R11
	MOVD syscall6Args_fn(R9), R10
	MOVD (syscall6Args_a+0)(R9), R0
	MOVD (syscall6Args_a+8)(R9), R1
	MOVD (syscall6Args_a+16)(R9), R2
	MOVD (syscall6Args_a+24)(R9), R3
	MOVD (syscall6Args_a+32)(R9), R4
	MOVD (syscall6Args_a+40)(R9), R5
	CBZ  R11, call               // no offsets: the common case, straight to the call
	TBZ  $0, R11, 2(PC)
	ADD  R9, R0, R0
	TBZ  $1, R11, 2(PC)
	ADD  R9, R1, R1
	TBZ  $2, R11, 2(PC)
	ADD  R9, R2, R2
	TBZ  $3, R11, 2(PC)
	ADD  R9, R3, R3
	TBZ  $4, R11, 2(PC)
	ADD  R9, R4, R4
	TBZ  $5, R11, 2(PC)
	ADD  R9, R5, R5
call:
	BL   (R10)

	MOVD 16(RSP), R9
	MOVD R0, syscall6Args_r1(R9)

	LDP  0(RSP), (R29, R30)
	ADD  $32, RSP
	RET
