package nvml

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/stretchr/testify/require"
)

func TestReturn(t *testing.T) {
	require.Equal(t, "NVML_ERROR_NOT_SUPPORTED", ERROR_NOT_SUPPORTED.Name())
	require.Equal(t, "NVML_ERROR_NOT_SUPPORTED", ERROR_NOT_SUPPORTED.String())
	require.Equal(t, "NVML_ERROR_NOT_SUPPORTED: the requested operation is not available on target device", ERROR_NOT_SUPPORTED.Error())
	require.Equal(t, "NVML_ERROR_UNINITIALIZED: NVML was not first initialized with nvmlInit()", ERROR_UNINITIALIZED.Error(), "an initialism stays")
	require.Equal(t, "NVML_ERROR_UNKNOWN", Return(999).Name())
	require.Equal(t, "nvmlReturn_t(31)", Return(31).Name())
	require.Equal(t, "nvmlReturn_t(31): unknown result", Return(31).Error())
	require.Len(t, returns, 32, "every nvmlReturn_t of nvml.h")
	// The values the probe relies on, as nvml.h numbers them.
	for r, n := range map[Return]int32{ERROR_INVALID_ARGUMENT: 2, ERROR_NOT_SUPPORTED: 3,
		ERROR_LIBRARY_NOT_FOUND: 12, ERROR_FUNCTION_NOT_FOUND: 13, ERROR_GPU_IS_LOST: 15,
		ERROR_ARGUMENT_VERSION_MISMATCH: 25, ERROR_UNKNOWN: 999} {
		require.Equal(t, n, int32(r), r.Name())
	}

	err := fmt.Errorf("probe: %w", &Error{Op: "nvmlDeviceGetUUID", Args: "device 3", Err: ERROR_GPU_IS_LOST})
	require.ErrorIs(t, err, ERROR_GPU_IS_LOST)
	require.NotErrorIs(t, err, ERROR_NOT_SUPPORTED)
	require.Equal(t, "probe: nvml: nvmlDeviceGetUUID(device 3): NVML_ERROR_GPU_IS_LOST: the GPU has fallen off the bus or has otherwise become inaccessible", err.Error())
	r, ok := ReturnOf(err)
	require.True(t, ok)
	require.Equal(t, ERROR_GPU_IS_LOST, r)
	_, ok = ReturnOf(errors.New("other"))
	require.False(t, ok)
	require.Equal(t, "nvml: nvmlInit_v2", (&Error{Op: "nvmlInit_v2"}).Error(), "an Error without a cause")
}

// A library or entry point that is missing matches both the loader's error and the result
// NVML's own loader stub would return.
func TestMissingMatchesLoaderAndReturn(t *testing.T) {
	le := &loader.LoadError{Library: "NVML library", Tried: []string{"libnvidia-ml.so.1"}, Reasons: []string{"not found"}}
	lib := symbolErr(&loader.SymbolError{Name: "nvmlInit_v2", Status: loader.DriverNotLoaded, Err: le})
	require.ErrorIs(t, lib, loader.ErrNoDriver)
	require.ErrorIs(t, lib, ERROR_LIBRARY_NOT_FOUND)
	require.NotErrorIs(t, lib, ERROR_FUNCTION_NOT_FOUND)
	require.Equal(t, le.Error(), lib.Error())

	sym := symbolErr(&loader.SymbolError{Name: "nvmlDeviceGetGpuFabricInfoV", Status: loader.SymbolNotFound})
	require.ErrorIs(t, sym, loader.ErrNotSupported)
	require.ErrorIs(t, sym, ERROR_FUNCTION_NOT_FOUND)
	require.NotErrorIs(t, sym, ERROR_NOT_SUPPORTED)
	require.NotErrorIs(t, sym, loader.ErrNoDriver)
}

func TestFact(t *testing.T) {
	k := Known(13000)
	require.True(t, k.Known())
	require.Equal(t, "13000", k.String())
	u := Unknown[int](&Error{Op: "nvmlSystemGetCudaDriverVersion_v2", Err: ERROR_NOT_SUPPORTED})
	require.False(t, u.Known())
	require.Equal(t, ERROR_NOT_SUPPORTED, u.Code)
	require.Equal(t, "unknown (nvml: nvmlSystemGetCudaDriverVersion_v2: NVML_ERROR_NOT_SUPPORTED: the requested operation is not available on target device)", u.String())
	o := Unknown[string](errors.New("no NVML on this node"))
	require.Equal(t, SUCCESS, o.Code)
	require.False(t, Unknown[bool](nil).Known())
}
