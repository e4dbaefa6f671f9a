package nvml

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The C layouts, worked out by hand from nvml.h (NVML_API_VERSION 13) with 4-byte unsigned
// int and nvmlReturn_t and 1-byte unsigned char, on every platform cuvmm ships for.
func TestStructLayouts(t *testing.T) {
	// nvmlPciInfo_t: char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId,
	// pciSubSystemId; char busId[32].
	var p pciInfo
	require.EqualValues(t, 68, unsafe.Sizeof(p), "nvmlPciInfo_t")
	require.EqualValues(t, 16, unsafe.Offsetof(p.domain))
	require.EqualValues(t, 20, unsafe.Offsetof(p.bus))
	require.EqualValues(t, 24, unsafe.Offsetof(p.device))
	require.EqualValues(t, 28, unsafe.Offsetof(p.pciDeviceID))
	require.EqualValues(t, 32, unsafe.Offsetof(p.pciSubSystemID))
	require.EqualValues(t, 36, unsafe.Offsetof(p.busID))

	// nvmlGpuFabricInfo_t: unsigned char clusterUuid[16]; nvmlReturn_t status; unsigned
	// cliqueId; nvmlGpuFabricState_t (unsigned char) state; 3 bytes of tail padding.
	var f gpuFabricInfo
	require.EqualValues(t, 28, unsafe.Sizeof(f), "nvmlGpuFabricInfo_t")
	require.EqualValues(t, 16, unsafe.Offsetof(f.status))
	require.EqualValues(t, 20, unsafe.Offsetof(f.cliqueID))
	require.EqualValues(t, 24, unsafe.Offsetof(f.state))

	// nvmlGpuFabricInfo_v3_t: unsigned version; clusterUuid[16]; status; cliqueId; state
	// (then 3 bytes of padding); unsigned healthMask; unsigned char healthSummary (then 3
	// of tail padding). nvmlGpuFabricInfo_v2_t ends before healthSummary: 36 bytes.
	var v gpuFabricInfoV3
	require.EqualValues(t, 40, unsafe.Sizeof(v), "nvmlGpuFabricInfo_v3_t")
	require.EqualValues(t, 4, unsafe.Offsetof(v.clusterUUID))
	require.EqualValues(t, 20, unsafe.Offsetof(v.status))
	require.EqualValues(t, 24, unsafe.Offsetof(v.cliqueID))
	require.EqualValues(t, 28, unsafe.Offsetof(v.state))
	require.EqualValues(t, 32, unsafe.Offsetof(v.healthMask))
	require.EqualValues(t, 36, unsafe.Offsetof(v.healthSummary))
	require.EqualValues(t, 36, gpuFabricInfoV2Size, "sizeof(nvmlGpuFabricInfo_v2_t)")

	// NVML_STRUCT_VERSION(GpuFabricInfo, v) = sizeof(nvmlGpuFabricInfo_v<v>_t) | v << 24.
	require.EqualValues(t, 0x02000024, gpuFabricInfoV2Ver, "nvmlGpuFabricInfo_v2")
	require.EqualValues(t, 0x03000028, gpuFabricInfoV3Ver, "nvmlGpuFabricInfo_v3")

	// nvmlDevice_t is a struct holding one pointer, passed by value in one register.
	require.EqualValues(t, unsafe.Sizeof(uintptr(0)), unsafe.Sizeof(Device{}.handle))
}

// The constants of nvml.h this package repeats.
func TestHeaderConstants(t *testing.T) {
	require.Equal(t, 36, NVLINK_MAX_LINKS)                 // NVML_NVLINK_MAX_LINKS
	require.Equal(t, 80, systemDriverVersionBufferSize)    // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
	require.Equal(t, 96, deviceNameV2BufferSize)           // NVML_DEVICE_NAME_V2_BUFFER_SIZE
	require.Equal(t, 96, deviceUUIDV2BufferSize)           // NVML_DEVICE_UUID_V2_BUFFER_SIZE
	require.Equal(t, 32, len(pciInfo{}.busID))             // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
	require.Equal(t, 16, len(gpuFabricInfo{}.clusterUUID)) // NVML_GPU_FABRIC_UUID_LEN
	require.EqualValues(t, 1, nvmlFeatureEnabled)          // NVML_FEATURE_ENABLED
}
