package cu

import (
	"math"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// These run everywhere: every case is refused before the driver is called (a fake handle
// must never reach a real driver, which would crash).

func TestKernelArgsLayout(t *testing.T) {
	args := []any{DevicePtr(0x7f0012345600), uint32(0xdeadbeef), int32(-7), uint64(1 << 40), int64(-1 << 50), float32(1.5), float64(-2.25)}
	ka, err := newKernelArgs(args)
	require.NoError(t, err)
	var pin runtime.Pinner
	defer pin.Unpin()
	params := ka.params(&pin)
	n := len(args)
	require.Len(t, ka.mem, 2*n, "n pointers, then n value slots, in one allocation")
	require.Equal(t, uintptr(unsafe.Pointer(&ka.mem[0])), params, "kernelParams is the pointer array")
	require.Equal(t, []uintptr{8, 4, 4, 8, 8, 4, 8}, ka.sizes)
	runtime.GC() // nothing moves or is freed under a pinned, referenced object
	// kernelParams[i] points to the i-th value (the driver reads it with the size of the
	// kernel's parameter); having checked that, read the values through the slots.
	for i := range n {
		p := uintptr(ka.mem[i])
		require.Equal(t, uintptr(unsafe.Pointer(&ka.mem[n+i])), p, "pointer %d", i)
		require.Zero(t, p%8, "value %d is 8-byte aligned", i)
	}
	at := func(i int) unsafe.Pointer { return unsafe.Pointer(&ka.mem[n+i]) }
	require.Equal(t, uint64(0x7f0012345600), *(*uint64)(at(0)))
	require.Equal(t, uint32(0xdeadbeef), *(*uint32)(at(1)))
	require.Equal(t, int32(-7), *(*int32)(at(2)))
	require.Equal(t, uint64(1<<40), *(*uint64)(at(3)))
	require.Equal(t, int64(-1<<50), *(*int64)(at(4)))
	require.Equal(t, float32(1.5), *(*float32)(at(5)))
	require.Equal(t, math.Float64bits(-2.25), *(*uint64)(at(6)))
	// A 4-byte value leaves the rest of its slot zero.
	require.Equal(t, uint64(0xdeadbeef), ka.mem[n+1])
	require.Equal(t, uint64(uint32(0xfffffff9)), ka.mem[n+2])
}

func TestKernelArgsNone(t *testing.T) {
	ka, err := newKernelArgs(nil)
	require.NoError(t, err)
	var pin runtime.Pinner
	defer pin.Unpin()
	require.Zero(t, ka.params(&pin), "no parameters: kernelParams is NULL")
}

func TestKernelArgsRefused(t *testing.T) {
	x := 1
	for _, a := range []any{1, uint(1), uintptr(1), 1.0 + 0i, "s", []byte{1}, &x, nil, true, int16(1), uint8(1), DevicePtr(0).String} {
		_, err := newKernelArgs([]any{DevicePtr(0x1000), a})
		require.ErrorIs(t, err, ErrInvalidArgument, "%T", a)
		require.ErrorIs(t, err, ERROR_INVALID_VALUE, "%T", a)
		require.Contains(t, err.Error(), "argument 1")
	}
}

func TestLaunchRefusedBeforeDriver(t *testing.T) {
	released := releasedContext(0x5)
	one := [3]uint32{1, 1, 1}

	err := released.Launch(Function{}, one, one, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "cuLaunchKernel", ce.Op)
	require.Contains(t, err.Error(), "zero Function")

	m := &Module{ctx: released, h: 0x10}
	f := Function{mod: m, h: 0x20, name: "k"}
	for _, dims := range [][2][3]uint32{{{0, 1, 1}, one}, {one, {1, 0, 1}}, {one, {1, 1, 0}}} {
		err = released.Launch(f, dims[0], dims[1], 0)
		require.ErrorIs(t, err, ErrInvalidArgument, "%v", dims)
		require.Contains(t, err.Error(), "dimension is 0")
	}
	err = released.Launch(f, one, one, 0, DevicePtr(1), 3)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "argument 1 has type int")
	require.Contains(t, err.Error(), "k, grid [1 1 1]")

	var nilCtx *Context
	require.ErrorIs(t, nilCtx.Launch(f, one, one, 0), ErrContextReleased)
	require.ErrorIs(t, released.Launch(f, one, one, 0, uint32(1)), ErrContextReleased, "reaches Do, which refuses")

	other := releasedContext(0x6)
	err = other.Launch(f, one, one, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "another context")

	m.g.Drain()
	m.g.Retire()
	require.ErrorIs(t, released.Launch(f, one, one, 0), ErrModuleUnloaded)
}

func TestModuleRefusedBeforeDriver(t *testing.T) {
	released := releasedContext(0x5)
	for _, img := range [][]byte{nil, {}, {0}, {0, 0, 0}} {
		m, err := released.ModuleLoadData(img)
		require.Nil(t, m)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.Contains(t, err.Error(), "cuModuleLoadData")
	}
	_, err := released.ModuleLoadData([]byte(".version 7.0\n"))
	require.ErrorIs(t, err, ErrContextReleased)
	var nilCtx *Context
	_, err = nilCtx.ModuleLoadData([]byte(".version 7.0\n"))
	require.ErrorIs(t, err, ErrContextReleased)

	var nilMod *Module
	_, err = nilMod.Function("k")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "cuModuleGetFunction")
	_, err = (&Module{}).Function("k")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, nilMod.Unload())
	require.NoError(t, (&Module{}).Unload())

	m := &Module{ctx: released, h: 0x10}
	for _, name := range []string{"", "a\x00b"} {
		_, err = m.Function(name)
		require.ErrorIs(t, err, ErrInvalidArgument, "%q", name)
	}
	_, err = m.Function("k")
	require.ErrorIs(t, err, ErrContextReleased)
	require.ErrorIs(t, m.Unload(), ErrContextReleased, "a failed Unload leaves the module loaded")
	require.True(t, m.g.Open())

	m.g.Drain()
	m.g.Retire()
	_, err = m.Function("k")
	require.ErrorIs(t, err, ErrModuleUnloaded)
	require.NoError(t, m.Unload(), "Unload is idempotent")
	require.NoError(t, m.Unload())
}

// releasedContext is a Context whose Release has run.
func releasedContext(h uintptr) *Context {
	c := &Context{h: h}
	c.g.Drain()
	c.g.Retire()
	return c
}
