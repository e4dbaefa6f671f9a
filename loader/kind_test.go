package loader

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// nvmlTestKind is NVML with the Linux name on every platform, for the fake.
var nvmlTestKind = &kind{
	what:  "NVML library",
	env:   EnvNVMLPath,
	paths: func() []string { return []string{"libnvidia-ml.so.1"} },
}

func TestProcessWideLibraries(t *testing.T) {
	require.Same(t, cudaKind, Default().kind)
	require.Same(t, nvmlKind, NVML().kind)
	require.NotSame(t, Default(), NVML())
	require.False(t, nvmlKind.getPA)
}

// NVML symbols are looked up by export name, even in a library that has cuGetProcAddress.
func TestPlainLookupLibrary(t *testing.T) {
	f := newFake()
	f.openable = map[string]bool{"libnvidia-ml.so.1": true}
	f.exports["nvmlInit_v2"] = 0x3000
	f.byProc["nvmlInit_v2"] = struct {
		version int
		addr    uintptr
	}{0, 0x9999}
	l := &Library{kind: nvmlTestKind, src: f}
	addr, err := l.NewProc(Symbol{Name: "nvmlInit_v2"}).Addr()
	require.NoError(t, err)
	require.Equal(t, uintptr(0x3000), addr)
	require.False(t, l.UsesGetProcAddress())
	require.Equal(t, "libnvidia-ml.so.1", l.Path())
	require.True(t, f.builtin.Load())

	_, err = l.NewProc(Symbol{Name: "nvmlDeviceGetGpuFabricInfoV"}).Addr()
	require.ErrorIs(t, err, ErrNotSupported)
	require.ErrorContains(t, err, "nvmlDeviceGetGpuFabricInfoV")
}

func TestPlainLookupLibraryAbsent(t *testing.T) {
	f := newFake()
	l := &Library{kind: nvmlTestKind, src: f}
	t.Setenv(EnvPath, "/driver/libcuda.so.1") // the driver's override is not NVML's
	err := l.Load()
	require.ErrorIs(t, err, ErrNoDriver)
	require.EqualError(t, err, "loader: cannot load the NVML library: libnvidia-ml.so.1: libnvidia-ml.so.1: cannot open shared object file: No such file or directory")
	var le *LoadError
	require.ErrorAs(t, err, &le)
	require.Equal(t, "NVML library", le.Library)

	_, err = l.NewProc(Symbol{Name: "nvmlInit_v2"}).Addr()
	require.ErrorIs(t, err, ErrNoDriver)
	var se *SymbolError
	require.ErrorAs(t, err, &se)
	require.Equal(t, DriverNotLoaded, se.Status)

	require.Equal(t, "loader: no NVML library on this platform (darwin/arm64)",
		(&LoadError{Library: "NVML library", Platform: "darwin/arm64"}).Error())
	require.Equal(t, "loader: cannot load the CUDA driver: libcuda.so.1: ?",
		(&LoadError{Tried: []string{"libcuda.so.1"}}).Error(), "a library tried without its reason")
}

// The override of each library is its own environment variable, and an override that is one
// of the platform's own names is searched for like it (System32 only, on Windows).
func TestOverrideIsBuiltinOnlyForOwnNames(t *testing.T) {
	for _, tc := range []struct {
		env     string
		builtin bool
	}{
		{"/opt/nvidia/libnvidia-ml.so.1", false},
		{"libnvidia-ml.so.1", true},
		{"libnvidia-ml.so", false},
	} {
		f := newFake()
		l := &Library{kind: nvmlTestKind, src: f}
		t.Setenv(EnvNVMLPath, tc.env)
		var le *LoadError
		require.ErrorAs(t, l.Load(), &le)
		require.Equal(t, []string{tc.env}, le.Tried)
		require.Equal(t, tc.builtin, f.builtin.Load(), tc.env)
	}
}
