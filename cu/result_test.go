package cu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// allResultValues lists every CUresult value in the header, to check the generated tables
// against each other.
func allResultValues(t *testing.T) []Result {
	t.Helper()
	var rs []Result
	// The driver's codes are all below 1000; scanning that range finds every entry of the
	// generated switch without a second generated table.
	for r := Result(0); r < 1000; r++ {
		if _, ok := resultName(r); ok {
			rs = append(rs, r)
		}
	}
	require.NotEmpty(t, rs)
	return rs
}

func TestResultValuesMatchHeader(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want int32
		name string
	}{
		{SUCCESS, 0, "CUDA_SUCCESS"},
		{ERROR_INVALID_VALUE, 1, "CUDA_ERROR_INVALID_VALUE"},
		{ERROR_OUT_OF_MEMORY, 2, "CUDA_ERROR_OUT_OF_MEMORY"},
		{ERROR_NOT_INITIALIZED, 3, "CUDA_ERROR_NOT_INITIALIZED"},
		{ERROR_NO_DEVICE, 100, "CUDA_ERROR_NO_DEVICE"},
		{ERROR_INVALID_DEVICE, 101, "CUDA_ERROR_INVALID_DEVICE"},
		{ERROR_INVALID_CONTEXT, 201, "CUDA_ERROR_INVALID_CONTEXT"},
		{ERROR_INVALID_HANDLE, 400, "CUDA_ERROR_INVALID_HANDLE"},
		{ERROR_NOT_FOUND, 500, "CUDA_ERROR_NOT_FOUND"},
		{ERROR_NOT_PERMITTED, 800, "CUDA_ERROR_NOT_PERMITTED"},
		{ERROR_NOT_SUPPORTED, 801, "CUDA_ERROR_NOT_SUPPORTED"},
		{ERROR_UNKNOWN, 999, "CUDA_ERROR_UNKNOWN"},
	} {
		require.Equal(t, c.want, int32(c.r), c.name)
		require.Equal(t, c.name, c.r.Name())
		require.Equal(t, c.name, c.r.String())
	}
}

func TestResultErrorText(t *testing.T) {
	require.Equal(t,
		"CUDA_ERROR_INVALID_VALUE: one or more of the parameters passed to the API call is not within an acceptable range of values",
		ERROR_INVALID_VALUE.Error())
	require.Equal(t, "CUDA_ERROR_NO_DEVICE: no CUDA-capable devices were detected by the installed CUDA driver",
		ERROR_NO_DEVICE.Error())
	// A leading initialism keeps its case.
	require.Equal(t, "CUDA_ERROR_OPERATING_SYSTEM: an OS call failed", ERROR_OPERATING_SYSTEM.Error())
	require.Equal(t, "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed", ERROR_INVALID_PTX.Error())

	unknown := Result(12345)
	require.Equal(t, "CUresult(12345): unknown result", unknown.Error())
	require.Equal(t, "CUresult(12345)", unknown.Name())
	require.Equal(t, "CUresult(12345)", unknown.String())
	require.Equal(t, "Unknown result", unknown.Description())
	require.Equal(t, "CUresult(-1): unknown result", Result(-1).Error())
}

func TestResultsMatchThroughWrapping(t *testing.T) {
	for _, code := range []Result{
		ERROR_INVALID_VALUE, ERROR_OUT_OF_MEMORY, ERROR_NOT_SUPPORTED, ERROR_NOT_PERMITTED, ERROR_INVALID_CONTEXT,
	} {
		err := resultOf(uintptr(code))
		wrapped := fmt.Errorf("cuMemCreate: %w", err)
		twice := fmt.Errorf("reserve: %w", wrapped)
		require.ErrorIs(t, wrapped, code, code.Name())
		require.ErrorIs(t, twice, code, code.Name())

		var got Result
		require.True(t, errors.As(twice, &got))
		require.Equal(t, code, got)
	}
	wrapped := fmt.Errorf("x: %w", resultOf(uintptr(ERROR_INVALID_VALUE)))
	require.NotErrorIs(t, wrapped, ERROR_OUT_OF_MEMORY)
	require.NotErrorIs(t, wrapped, ERROR_NOT_SUPPORTED)
}

func TestResultOf(t *testing.T) {
	require.NoError(t, resultOf(0))
	require.Equal(t, error(ERROR_OUT_OF_MEMORY), resultOf(2))
	// Only the low 32 bits of the return register carry the enum. (Variables, so that the
	// conversions truncate instead of overflowing a constant on 32-bit targets.)
	garbage := uint64(0xdead_beef) << 32
	require.Equal(t, error(ERROR_NOT_SUPPORTED), resultOf(uintptr(garbage|801)))
	require.NoError(t, resultOf(uintptr(garbage)))
	require.Equal(t, error(Result(-1)), resultOf(uintptr(0xffff_ffff)))
}

func TestResultTablesConsistent(t *testing.T) {
	names := make(map[string]Result)
	for _, r := range allResultValues(t) {
		name, ok := resultName(r)
		require.True(t, ok)
		require.True(t, strings.HasPrefix(name, "CUDA_"), name)
		other, dup := names[name]
		require.False(t, dup, "%s names both %d and %d", name, int32(other), int32(r))
		names[name] = r

		desc, ok := resultDescription(r)
		require.True(t, ok, name)
		require.NotEmpty(t, strings.TrimSpace(desc), name)
		require.LessOrEqual(t, len(desc), 160, name)
		require.NotRegexp(t, `(^|[\s(])::`, desc, name)
		require.NotContains(t, desc, "\n", name)
	}
	_, ok := resultDescription(Result(12345))
	require.False(t, ok)
}
