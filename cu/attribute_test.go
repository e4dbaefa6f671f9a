package cu

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeviceAttributeValuesMatchHeader(t *testing.T) {
	for _, c := range []struct {
		a    DeviceAttribute
		want int32
		name string
	}{
		{DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1, "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"},
		{DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 41, "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING"},
		{DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102, "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
		{DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 103, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED"},
		{DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED, 107, "CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED"},
		{DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 110, "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED"},
		{DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 128, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED"},
		{DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 132, "CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED"},
		{DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 141, "CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
		{DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 145, "CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
	} {
		require.Equal(t, c.want, int32(c.a), c.name)
		require.Equal(t, c.name, c.a.String())
		require.NotEmpty(t, c.a.Description(), c.name)
	}
	require.Equal(t, DeviceAttribute(148), deviceAttributeMax)
}

func TestDeviceAttributeAliasesNamePrimary(t *testing.T) {
	// The deprecated spelling comes first in the header; the lookup must still give the
	// current name.
	require.Equal(t, DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED)
	require.Equal(t, "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
		DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED.String())
	require.Equal(t, DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, DEVICE_ATTRIBUTE_SHARED_MEMORY_PER_BLOCK)
	require.Equal(t, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK", DEVICE_ATTRIBUTE_SHARED_MEMORY_PER_BLOCK.String())
	require.Equal(t, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS",
		DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_ARRAY_NUMSLICES.String())
}

func TestDeviceAttributeUnknown(t *testing.T) {
	require.Equal(t, "CUdevice_attribute(12345)", DeviceAttribute(12345).String())
	require.Equal(t, "CUdevice_attribute(0)", DeviceAttribute(0).String())
	require.Equal(t, "Unknown device attribute", DeviceAttribute(12345).Description())
	require.Equal(t, "CUdevice_attribute(148)", deviceAttributeMax.String())
}

func TestDeviceAttributesListConsistent(t *testing.T) {
	all := DeviceAttributes()
	require.NotEmpty(t, all)
	require.True(t, slices.IsSorted(all))
	require.Equal(t, len(all), len(slices.Compact(slices.Clone(all))), "duplicate attribute")
	require.Less(t, all[len(all)-1], deviceAttributeMax)

	names := make(map[string]bool)
	for _, a := range all {
		name, ok := attributeName(a)
		require.True(t, ok, "%d", int32(a))
		require.True(t, strings.HasPrefix(name, "CU_DEVICE_ATTRIBUTE_"), name)
		require.False(t, names[name], "duplicate name %s", name)
		names[name] = true

		desc, ok := attributeDescription(a)
		require.True(t, ok, name)
		require.NotEmpty(t, strings.TrimSpace(desc), name)
		require.LessOrEqual(t, len(desc), 160, name)
		require.NotRegexp(t, `(^|[\s(])::`, desc, name)
	}
	// Every known value is in the list.
	for a := DeviceAttribute(-1); a <= deviceAttributeMax; a++ {
		_, ok := attributeName(a)
		require.Equal(t, ok, slices.Contains(all, a), "%d", int32(a))
	}

	// The result is a copy: changing it must not change the package's list.
	all[0] = -1
	require.NotEqual(t, DeviceAttribute(-1), DeviceAttributes()[0])
}
