package nvml

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The field positions are NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_* and _WIDTH_* of nvml.h:
// degraded bandwidth 0 (2 bits), route recovery 2, route unhealthy 4, access timeout
// recovery 6 (2 bits each), incorrect configuration 8 (4 bits), partition assigned 12.
func TestHealthMaskFields(t *testing.T) {
	m := HealthMask(1 | 2<<2 | 1<<4 | 2<<6 | 7<<8 | 2<<12)
	require.Equal(t, HealthTrue, m.DegradedBandwidth())
	require.Equal(t, HealthFalse, m.RouteRecovery())
	require.Equal(t, HealthTrue, m.RouteUnhealthy())
	require.Equal(t, HealthFalse, m.AccessTimeoutRecovery())
	require.Equal(t, GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INVALID_LOCATION, m.IncorrectConfiguration())
	require.Equal(t, HealthFalse, m.PartitionAssigned())
	require.Equal(t, []string{
		"NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE",
		"NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE",
		"NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INVALID_LOCATION",
	}, m.Problems())
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE|"+
		"NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE|"+
		"NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE|"+
		"NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE|"+
		"NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INVALID_LOCATION|"+
		"NVML_GPU_FABRIC_HEALTH_MASK_PARTITION_ASSIGNED_FALSE", m.String())

	require.Equal(t, []string{"NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE"}, HealthMask(1<<6).Problems())
	require.Empty(t, HealthMask(0).Problems(), "nothing supported, nothing reported")
	require.Empty(t, HealthMask(1<<8).Problems(), "INCORRECT_CONFIGURATION_NONE")
	require.Equal(t, "0", HealthMask(0).String())
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE|0xc000", HealthMask(2|3<<14).String(), "bits nvml.h does not define")
	require.Equal(t, "3", HealthFlag(3).String())
}

func TestIncorrectConfigurationNames(t *testing.T) {
	want := []string{"NOT_SUPPORTED", "NONE", "INCORRECT_SYSGUID", "INCORRECT_CHASSIS_SN", "NO_PARTITION",
		"INSUFFICIENT_NVLINKS", "INCOMPATIBLE_GPU_FW", "INVALID_LOCATION", "GPU_STATE_INVALID"}
	for i, w := range want {
		require.Equal(t, "NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_"+w, IncorrectConfiguration(i).String())
	}
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION(9)", IncorrectConfiguration(9).String())
	require.Equal(t, IncorrectConfiguration(8), GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_GPU_STATE_INVALID)
}

func TestEnumNames(t *testing.T) {
	require.Equal(t, "NVML_GPU_FABRIC_STATE_NOT_SUPPORTED", FabricState(0).String())
	require.Equal(t, "NVML_GPU_FABRIC_STATE_NOT_STARTED", FabricState(1).String())
	require.Equal(t, "NVML_GPU_FABRIC_STATE_IN_PROGRESS", FabricState(2).String())
	require.Equal(t, "NVML_GPU_FABRIC_STATE_COMPLETED", FabricState(3).String())
	require.Equal(t, "nvmlGpuFabricState_t(4)", FabricState(4).String())

	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED", HealthSummary(0).String())
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY", HealthSummary(1).String())
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY", HealthSummary(2).String())
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY", HealthSummary(3).String())
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_SUMMARY(4)", HealthSummary(4).String())

	require.Equal(t, "NVML_NVLINK_DEVICE_TYPE_GPU", NvLinkDeviceType(0).String())
	require.Equal(t, "NVML_NVLINK_DEVICE_TYPE_IBMNPU", NvLinkDeviceType(1).String())
	require.Equal(t, "NVML_NVLINK_DEVICE_TYPE_SWITCH", NvLinkDeviceType(2).String())
	require.Equal(t, "NVML_NVLINK_DEVICE_TYPE_UNKNOWN", NvLinkDeviceType(0xff).String())
	require.Equal(t, "nvmlIntNvLinkDeviceType_t(3)", NvLinkDeviceType(3).String())
}

func TestFormatUUID(t *testing.T) {
	require.Equal(t, "00000000-0000-0000-0000-000000000000", formatUUID([16]byte{}))
	require.Equal(t, "00010203-0405-0607-0809-0a0b0c0d0e0f",
		formatUUID([16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}))
}
