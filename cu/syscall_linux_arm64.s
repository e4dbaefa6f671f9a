//go:build linux && arm64

#include "textflag.h"
#include "go_asm.h"

// syscall6ABI0 holds the trampoline's entry address (see syscall_fast.go).
GLOBL ·syscall6ABI0(SB), NOPTR|RODATA, $8
DATA ·syscall6ABI0(SB)/8, $syscall6trampoline<>(SB)

// syscall6trampoline<> is called by runtime.asmcgocall on the system stack, as a C
// function (AAPCS64): R0 = *syscall6Args, R30 (LR) = return address. It calls
// args.fn(args.a1, ..., a6) in R0-R5 and stores the integer result (R0) in args.r1.
//
// NOFRAME: a non-leaf function with a zero frame size would get a prologue inserted by the
// Go assembler (saving LR and FP in a frame it sizes itself); with NOFRAME it inserts
// nothing, so the 32-byte frame below is exactly what is written here.
//
// Stack: RSP is 16-byte aligned on entry (asmcgocall keeps it so, and AAPCS64 requires it
// at every public interface); the frame is 32 bytes, so it stays aligned at the BL.
// Frame: 0(RSP) = caller's FP (R29), 8(RSP) = LR (R30), 16(RSP) = *syscall6Args.
//
// Registers: only R0-R5 and R9-R10 (caller-saved temporaries) are used; R29 and R30 are
// saved and restored. R19-R28 (and so the Go g register R28) are callee-saved in C and
// preserved by fn. The Go assembler's temporary R27 and the platform register R18 are not
// touched. The args pointer is kept in our frame across the call.
TEXT syscall6trampoline<>(SB), NOSPLIT|NOFRAME, $0
	SUB  $32, RSP
	STP  (R29, R30), 0(RSP)      // frame record: FP, LR
	MOVD RSP, R29
	MOVD R0, 16(RSP)             // keep *syscall6Args across the call
	MOVD R0, R9

	MOVD syscall6Args_fn(R9), R10
	MOVD syscall6Args_a1(R9), R0
	MOVD syscall6Args_a2(R9), R1
	MOVD syscall6Args_a3(R9), R2
	MOVD syscall6Args_a4(R9), R3
	MOVD syscall6Args_a5(R9), R4
	MOVD syscall6Args_a6(R9), R5
	BL   (R10)

	MOVD 16(RSP), R9
	MOVD R0, syscall6Args_r1(R9)

	LDP  0(RSP), (R29, R30)
	ADD  $32, RSP
	RET
