package cu

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// Frames against libc: the trampoline (or, under the cuvmm_purego tag, the heap copy of
// syscall_other.go) must turn exactly the arguments marked in rel into addresses inside the
// frame, in every argument position, and leave the others alone.

// scratchBytes is f's scratch as bytes.
func scratchBytes(f *frame) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&f.scratch[0])), frameWords*8)
}

// refByte makes argument i the address of scratch byte off.
func refByte(f *frame, i, off int) {
	f.rel |= 1 << i
	f.a[i] = scratchOffset + uintptr(off)
}

func TestFrameLayout(t *testing.T) {
	var f frame
	require.Equal(t, uintptr(0), unsafe.Offsetof(f.syscall6Args), "syscall6Args must start the frame: offsets count from it")
	require.Equal(t, scratchOffset, uintptr(unsafe.Pointer(&f.scratch[0]))-uintptr(unsafe.Pointer(&f)))
	// What the generated calls put in a frame fits: an out-parameter in word 0, then a
	// 4-word struct; five access descriptors; a fabric handle.
	require.LessOrEqual(t, 8+unsafe.Sizeof(MemAllocationProp{}), uintptr(frameWords*8))
	require.LessOrEqual(t, 8+unsafe.Sizeof(MulticastObjectProp{}), uintptr(frameWords*8))
	require.LessOrEqual(t, 5*unsafe.Sizeof(MemAccessDesc{}), uintptr(frameWords*8))
	require.LessOrEqual(t, unsafe.Sizeof(MemFabricHandle{}), uintptr(frameWords*8))
}

// sscanfFrame calls sscanf(buf, format, &v[0], &v[1], &v[2], &v[3]) with all six
// arguments pointing into one frame, and returns sscanf's result and the four values.
func sscanfFrame(fn uintptr, input string) (int32, [4]int32) {
	var f frame
	b := scratchBytes(&f)
	const format = "%d %d %d %d"
	copy(b[32:], format) // bytes 32..43, NUL at 43
	copy(b[44:], input)  // up to 19 bytes, NUL-terminated by the zeroed frame
	refByte(&f, 0, 44)
	refByte(&f, 1, 32)
	for i := range 4 {
		refByte(&f, 2+i, 4*i) // four int32 in words 0 and 1
	}
	f.fn = fn
	r := int32(uint32(f.invoke()))
	var v [4]int32
	for i := range v {
		v[i] = *(*int32)(unsafe.Pointer(&b[4*i]))
	}
	return r, v
}

func TestFrameEveryArgumentPosition(t *testing.T) {
	sscanf := libcAddr(t, "sscanf")
	r, v := sscanfFrame(sscanf, "11 -22 33 -44")
	require.Equal(t, int32(4), r)
	require.Equal(t, [4]int32{11, -22, 33, -44}, v)
}

func TestFrameMixedArguments(t *testing.T) {
	memset := libcAddr(t, "memset")
	labs := libcAddr(t, "labs")
	// memset(scratch+8, 0x5a, 24): a pointer first, values after it.
	var f frame
	for i := range f.scratch {
		f.scratch[i] = 0xeeeeeeeeeeeeeeee
	}
	f.fn = memset
	refByte(&f, 0, 8)
	f.a[1], f.a[2] = 0x5a, 24
	r := f.invoke()
	if fastPath {
		require.Equal(t, uintptr(unsafe.Pointer(&f.scratch[1])), r, "memset returns its destination: the frame's own address")
	} else {
		require.NotZero(t, r, "memset returns its destination: the heap copy's address")
	}
	b := scratchBytes(&f)
	for i, c := range b {
		want := byte(0xee)
		if i >= 8 && i < 32 {
			want = 0x5a
		}
		require.Equal(t, want, c, "byte %d", i)
	}
	// A value that is not marked stays a value, even when it looks like an offset.
	var g frame
	g.fn = labs
	g.a[0] = scratchOffset
	require.Equal(t, scratchOffset, g.invoke())
}

// TestFrameClockGettime is the shape of most driver calls: a value, then an out-parameter
// in the frame, and call's result handling.
func TestFrameClockGettime(t *testing.T) {
	clk := libcProc(t, "clock_gettime")
	var f frame
	f.a[0] = 1 // CLOCK_MONOTONIC
	f.ref(1, 2)
	require.NoError(t, f.call(clk))
	require.NotZero(t, f.scratch[2]+f.scratch[3], "timespec written into words 2 and 3")
	require.Zero(t, f.scratch[0]+f.scratch[1]+f.scratch[4])
}

// TestFrameStress makes frame calls from many goroutines while the GC runs and each call
// sits at the bottom of a shallow recursion, so that the call itself (purego's, on the
// fallback path) is what grows and moves the stack: a frame address formed before the
// stack moved would make sscanf write into freed stack memory and the values come back
// wrong. (It caught the fallback path's heap copy being placed on the stack.)
func TestFrameStress(t *testing.T) {
	sscanf := libcAddr(t, "sscanf")
	iters := 2000
	if testing.Short() {
		iters = 200
	}
	stress(t, 8, iters, func(_, i int) int { return i % 64 }, func(w, i int) error {
		want := [4]int32{int32(w), int32(i), -int32(i), int32(w * i)}
		input := fmt.Sprintf("%d %d %d %d", want[0], want[1], want[2], want[3])
		if r, v := sscanfFrame(sscanf, input); r != 4 || v != want {
			return fmt.Errorf("sscanf(%q) = %d %v", input, r, v)
		}
		return nil
	})
}
