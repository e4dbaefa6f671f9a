package cu

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/stretchr/testify/require"
)

// These run everywhere: nothing here may need a working driver.

func TestUnknownHandleNeverReachesDriver(t *testing.T) {
	bogus := MemHandle(0xdeadbeef)
	for name, f := range map[string]func() error{
		"map":           func() error { return MemMap(0x7f0000000000, 2<<20, 0, bogus, 0) },
		"properties":    func() error { _, err := MemGetAllocationPropertiesFromHandle(bogus); return err },
		"export fd":     func() error { _, err := MemExportToFD(bogus); return err },
		"export fabric": func() error { _, err := MemExportToFabric(bogus); return err },
		"release":       func() error { return MemRelease(bogus) },
		"mc add":        func() error { return MulticastAddDevice(bogus, 0) },
		"mc bind":       func() error { return MulticastBindMem(bogus, 0, bogus, 0, 2<<20, 0) },
		"mc bindaddr":   func() error { return MulticastBindAddr(bogus, 0, 0x7f0000000000, 2<<20, 0) },
		"mc unbind":     func() error { return MulticastUnbind(bogus, 0, 0, 2<<20) },
	} {
		t.Run(name, func(t *testing.T) {
			err := f()
			require.ErrorIs(t, err, ErrUnknownHandle)
			require.Contains(t, err.Error(), "0xdeadbeef")
			var ce *Error
			require.ErrorAs(t, err, &ce)
			require.NotEmpty(t, ce.Op)
		})
	}
}

// The messages of the generated wrappers (zwrappers.go) are those the hand-written ones had:
// the call and its arguments, as each //cu:export line formats them.
func TestGeneratedWrapperMessages(t *testing.T) {
	bogus := MemHandle(0xdeadbeef)
	_, err := MemGetAllocationPropertiesFromHandle(bogus)
	unknown := ": " + ErrUnknownHandle.Error()
	for _, c := range []struct {
		err  error
		want string
	}{
		{err, "cu: cuMemGetAllocationPropertiesFromHandle(handle 0xdeadbeef)"},
		{MulticastAddDevice(bogus, 3), "cu: cuMulticastAddDevice(handle 0xdeadbeef, device 3)"},
		{MulticastBindMem(bogus, 1, bogus+1, 2, 3, 4), "cu: cuMulticastBindMem(handle 0xdeadbeef+1, handle 0xdeadbef0+2, 3, flags 4)"},
		{MulticastBindAddr(bogus, 1, 0x7f00, 3, 4), "cu: cuMulticastBindAddr(handle 0xdeadbeef+1, 0x7f00, 3, flags 4)"},
		{MulticastUnbind(bogus, 2, 3, 4), "cu: cuMulticastUnbind(handle 0xdeadbeef, device 2, 3, 4)"},
	} {
		require.EqualError(t, c.err, c.want+unknown)
	}
}

func TestArgumentErrors(t *testing.T) {
	c := &Context{dev: 0, h: 1}
	err := c.CopyHtoD(0x1000, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, ERROR_INVALID_VALUE)
	require.Contains(t, err.Error(), "cuMemcpyHtoD")
	require.ErrorIs(t, c.CopyDtoH([]byte{}, 0x1000), ErrInvalidArgument)
	require.ErrorIs(t, c.CopyDtoD(0x1000, 0x2000, 0), ErrInvalidArgument)
	require.ErrorIs(t, c.MemsetD8(0x1000, 1, 0), ErrInvalidArgument)
	require.ErrorIs(t, c.MemsetD32(0x1000, 1, 0), ErrInvalidArgument)
	_, err = c.MemAlloc(0)
	require.ErrorIs(t, err, ErrInvalidArgument)

	var nilCtx *Context
	require.ErrorIs(t, nilCtx.Synchronize(), ErrContextReleased)
	released := &Context{dev: 0, h: 1}
	released.g.Drain()
	released.g.Retire()
	require.ErrorIs(t, released.Synchronize(), ErrContextReleased)
	require.NoError(t, released.Release(), "Release is idempotent")
	require.ErrorIs(t, new(Context).Synchronize(), ErrContextReleased, "the zero Context is unusable")
	// A zero Context names device 0 but holds no reference of it: releasing device 0's
	// primary context would drop someone else's (without a driver, the call would fail).
	require.NoError(t, new(Context).Release(), "the zero Context holds nothing to release")
	require.NoError(t, nilCtx.Release())
	require.EqualValues(t, -1, nilCtx.Device())

	// A pid the driver's int cannot hold would name another process (1234 + 2^32 is 1234).
	for _, pid := range []int{0, -1, 1234 + 1<<32, math.MaxInt32 + 1} {
		_, err := CheckpointProcessState(pid)
		require.ErrorIs(t, err, ERROR_INVALID_VALUE, "pid %d", pid)
		require.ErrorContains(t, err, fmt.Sprintf("cuCheckpointProcessGetState(pid %d)", pid))
		require.ErrorIs(t, CheckpointProcessLock(pid, time.Second), ERROR_INVALID_VALUE, "pid %d", pid)
		require.ErrorIs(t, CheckpointProcessRestore(pid, nil), ERROR_INVALID_VALUE, "pid %d", pid)
		require.ErrorIs(t, CheckpointProcessUnlock(pid), ERROR_INVALID_VALUE, "pid %d", pid)
		require.ErrorIs(t, CheckpointProcessCheckpoint(pid), ERROR_INVALID_VALUE, "pid %d", pid)
		_, err = CheckpointProcessRestoreThreadID(pid)
		require.ErrorIs(t, err, ERROR_INVALID_VALUE, "pid %d", pid)
	}
	// The lock's timeout is milliseconds in 32 bits, rounded up without overflowing near
	// the largest Duration ("forever" to some callers).
	for _, d := range []time.Duration{-1, 1 << 32 * time.Millisecond, math.MaxInt64, math.MaxInt64 - 1} {
		require.ErrorIs(t, CheckpointProcessLock(1234, d), ERROR_INVALID_VALUE, "timeout %v", d)
	}
}

func TestErrorFormat(t *testing.T) {
	err := wrap(ERROR_INVALID_VALUE, "cuMemMap", "%#x, %d", 0x302000000, 2<<20)
	require.Equal(t, "cu: cuMemMap(0x302000000, 2097152): "+ERROR_INVALID_VALUE.Error(), err.Error())
	require.ErrorIs(t, err, ERROR_INVALID_VALUE)
	r, ok := ResultOf(fmt.Errorf("outer: %w", err))
	require.True(t, ok)
	require.Equal(t, ERROR_INVALID_VALUE, r)
	_, ok = ResultOf(errors.New("plain"))
	require.False(t, ok)
}

func TestMissingSymbolMatchesBothSentinels(t *testing.T) {
	err := symbolErr(&loader.SymbolError{Name: "cuMulticastCreate", Version: 12010, Status: loader.VersionNotSufficient})
	require.ErrorIs(t, err, loader.ErrNotSupported)
	require.ErrorIs(t, err, ERROR_NOT_SUPPORTED)
	require.Contains(t, err.Error(), "cuMulticastCreate")
	noDriver := symbolErr(&loader.SymbolError{Name: "cuInit", Status: loader.DriverNotLoaded, Err: &loader.LoadError{Tried: []string{"x"}, Reasons: []string{"y"}}})
	require.ErrorIs(t, noDriver, loader.ErrNoDriver)
	require.NotErrorIs(t, noDriver, ERROR_NOT_SUPPORTED)
}

func TestUUIDString(t *testing.T) {
	u := UUID{0x6f, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8}
	require.Equal(t, "GPU-6f1a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8", u.String())
}

func TestEveryProcDeclaredOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Symbols() {
		s := p.Symbol()
		require.False(t, seen[s.Name], "declared twice: %s", s.Name)
		seen[s.Name] = true
		require.Greater(t, s.Version, 1000, s.Name)
	}
	require.True(t, seen["cuMemCreate"] && seen["cuMulticastCreate"] && seen["cuMemRetainAllocationHandle"])
}

func TestParseUUID(t *testing.T) {
	u := UUID{0xd1, 0x2c, 0x5e, 0x03, 0x9a, 0x4b, 0x11, 0xef, 0x80, 0x01, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	for _, s := range []string{u.String(), strings.TrimPrefix(u.String(), "GPU-"), strings.ToUpper(strings.TrimPrefix(u.String(), "GPU-"))} {
		got, err := ParseUUID(s)
		require.NoError(t, err, s)
		require.Equal(t, u, got, s)
	}
	for _, bad := range []string{"", "GPU-", "GPU-d12c5e03-9a4b-11ef-8001-aabbccddeef", "GPU-d12c5e03-9a4b-11ef-8001-aabbccddeeffa", "GPU-d12c5e03-9a4b-11ef-8001aabbccddeeff", "GPU-x12c5e03-9a4b-11ef-8001-aabbccddeeff", "MIG-d12c5e03-9a4b-11ef-8001-aabbccddeeff"} {
		_, err := ParseUUID(bad)
		require.Error(t, err, bad)
	}
}
