package nvml

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"structs"
	"unsafe"
)

// FabricState is an nvmlGpuFabricState_t: how far the GPU's registration with the NVLink
// fabric (Fabric Manager, on NVSwitch systems) has got.
type FabricState uint8

// The NVML_GPU_FABRIC_STATE_* values, named as in C less "NVML_".
const (
	GPU_FABRIC_STATE_NOT_SUPPORTED FabricState = 0
	GPU_FABRIC_STATE_NOT_STARTED   FabricState = 1
	GPU_FABRIC_STATE_IN_PROGRESS   FabricState = 2
	GPU_FABRIC_STATE_COMPLETED     FabricState = 3
)

// String returns the C name, such as "NVML_GPU_FABRIC_STATE_COMPLETED".
func (s FabricState) String() string {
	return cName(s, "NVML_GPU_FABRIC_STATE_", "nvmlGpuFabricState_t",
		"NOT_SUPPORTED", "NOT_STARTED", "IN_PROGRESS", "COMPLETED")
}

// cName returns the C name of v, prefix and the name of v in names, or unknown(v) for a
// value past them.
func cName[T ~uint8 | ~uint32](v T, prefix, unknown string, names ...string) string {
	if uint64(v) < uint64(len(names)) {
		return prefix + names[v]
	}
	return unknown + "(" + strconv.Itoa(int(v)) + ")"
}

// HealthSummary is the NVML_GPU_FABRIC_HEALTH_SUMMARY_* value of nvmlGpuFabricInfo_v3.
type HealthSummary uint8

// The NVML_GPU_FABRIC_HEALTH_SUMMARY_* values, named as in C less "NVML_".
const (
	GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED    HealthSummary = 0
	GPU_FABRIC_HEALTH_SUMMARY_HEALTHY          HealthSummary = 1
	GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY        HealthSummary = 2
	GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY HealthSummary = 3
)

// String returns the C name, such as "NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY".
func (s HealthSummary) String() string {
	return cName(s, "NVML_GPU_FABRIC_HEALTH_SUMMARY_", "NVML_GPU_FABRIC_HEALTH_SUMMARY",
		"NOT_SUPPORTED", "HEALTHY", "UNHEALTHY", "LIMITED_CAPACITY")
}

// HealthMask is the healthMask of nvmlGpuFabricInfo_v2 and later: fields of a few bits
// each, read with NVML_GPU_FABRIC_HEALTH_GET(mask, field), which its methods decode.
type HealthMask uint32

// HealthFlag is the value of one two-bit field of a HealthMask. nvml.h defines the three
// values per field (NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE, ...), the same for each.
type HealthFlag uint8

const (
	HealthNotSupported HealthFlag = 0 // NVML_GPU_FABRIC_HEALTH_MASK_<field>_NOT_SUPPORTED
	HealthTrue         HealthFlag = 1 // NVML_GPU_FABRIC_HEALTH_MASK_<field>_TRUE
	HealthFalse        HealthFlag = 2 // NVML_GPU_FABRIC_HEALTH_MASK_<field>_FALSE
)

// String returns the suffix of the C names: "NOT_SUPPORTED", "TRUE" or "FALSE".
func (f HealthFlag) String() string {
	if f > HealthFalse {
		return strconv.Itoa(int(f))
	}
	return cName(f, "", "", "NOT_SUPPORTED", "TRUE", "FALSE")
}

// IncorrectConfiguration is the four-bit INCORRECT_CONFIGURATION field of a HealthMask.
type IncorrectConfiguration uint8

// The NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_* values, named as in C less
// "NVML_".
const (
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NOT_SUPPORTED        IncorrectConfiguration = 0
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE                 IncorrectConfiguration = 1
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_SYSGUID    IncorrectConfiguration = 2
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCORRECT_CHASSIS_SN IncorrectConfiguration = 3
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NO_PARTITION         IncorrectConfiguration = 4
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS IncorrectConfiguration = 5
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INCOMPATIBLE_GPU_FW  IncorrectConfiguration = 6
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INVALID_LOCATION     IncorrectConfiguration = 7
	GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_GPU_STATE_INVALID    IncorrectConfiguration = 8
)

// String returns the C name, such as
// "NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NO_PARTITION".
func (c IncorrectConfiguration) String() string {
	return cName(c, healthPrefix+"INCORRECT_CONFIGURATION_", healthPrefix+"INCORRECT_CONFIGURATION",
		"NOT_SUPPORTED", "NONE", "INCORRECT_SYSGUID", "INCORRECT_CHASSIS_SN", "NO_PARTITION",
		"INSUFFICIENT_NVLINKS", "INCOMPATIBLE_GPU_FW", "INVALID_LOCATION", "GPU_STATE_INVALID")
}

const healthPrefix = "NVML_GPU_FABRIC_HEALTH_MASK_"

// The fields of the health mask: NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_<name> and _WIDTH_<name>.
var healthFields = [...]struct {
	name         string
	shift, width uint32
}{
	{"DEGRADED_BW", 0, 0x3},
	{"ROUTE_RECOVERY", 2, 0x3},
	{"ROUTE_UNHEALTHY", 4, 0x3},
	{"ACCESS_TIMEOUT_RECOVERY", 6, 0x3},
	{"INCORRECT_CONFIGURATION", 8, 0xf},
	{"PARTITION_ASSIGNED", 12, 0x3},
}

const (
	fieldDegradedBW = iota
	fieldRouteRecovery
	fieldRouteUnhealthy
	fieldAccessTimeoutRecovery
	fieldIncorrectConfiguration
	fieldPartitionAssigned
)

// knownHealthBits are the bits of the fields above; NVML may set others in a newer version.
const knownHealthBits HealthMask = 0x3fff

func (m HealthMask) get(field int) uint8 {
	f := healthFields[field]
	return uint8(uint32(m) >> f.shift & f.width)
}

// DegradedBandwidth: TRUE when the GPU's NVLink bandwidth is degraded.
func (m HealthMask) DegradedBandwidth() HealthFlag { return HealthFlag(m.get(fieldDegradedBW)) }

// RouteRecovery: TRUE while a fabric route recovery is in progress.
func (m HealthMask) RouteRecovery() HealthFlag { return HealthFlag(m.get(fieldRouteRecovery)) }

// RouteUnhealthy: TRUE when an NVLink fabric route is unhealthy.
func (m HealthMask) RouteUnhealthy() HealthFlag { return HealthFlag(m.get(fieldRouteUnhealthy)) }

// AccessTimeoutRecovery: TRUE while an access timeout recovery is in progress.
func (m HealthMask) AccessTimeoutRecovery() HealthFlag {
	return HealthFlag(m.get(fieldAccessTimeoutRecovery))
}

// IncorrectConfiguration: what is wrong with the fabric configuration, NONE when nothing.
func (m HealthMask) IncorrectConfiguration() IncorrectConfiguration {
	return IncorrectConfiguration(m.get(fieldIncorrectConfiguration))
}

// PartitionAssigned: TRUE when the GPU is in a fabric partition.
func (m HealthMask) PartitionAssigned() HealthFlag {
	return HealthFlag(m.get(fieldPartitionAssigned))
}

// Problems lists, by their C names, the fields that report trouble: bandwidth degraded,
// route recovery in progress, route unhealthy, access timeout recovery in progress, and an
// incorrect configuration. An unassigned partition is not listed: whether that is a
// problem depends on how the node is meant to be partitioned.
func (m HealthMask) Problems() []string {
	var p []string
	for _, f := range []int{fieldDegradedBW, fieldRouteRecovery, fieldRouteUnhealthy, fieldAccessTimeoutRecovery} {
		if HealthFlag(m.get(f)) == HealthTrue {
			p = append(p, healthPrefix+healthFields[f].name+"_TRUE")
		}
	}
	if c := m.IncorrectConfiguration(); c > GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE {
		p = append(p, c.String())
	}
	return p
}

// String lists every field the GPU reports (those not NOT_SUPPORTED) by its C name, such
// as "NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE|...", then any bits nvml.h does not
// define, in hex; "0" when no field is supported.
func (m HealthMask) String() string {
	var parts []string
	for i, f := range healthFields {
		v := m.get(i)
		switch {
		case v == 0:
			continue
		case i == fieldIncorrectConfiguration:
			parts = append(parts, IncorrectConfiguration(v).String())
		default:
			parts = append(parts, healthPrefix+f.name+"_"+HealthFlag(v).String())
		}
	}
	if rest := m &^ knownHealthBits; rest != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(rest), 16))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// FabricInfo is a GPU's place in the NVLink fabric, from nvmlDeviceGetGpuFabricInfoV (or,
// with an NVML that lacks it, nvmlDeviceGetGpuFabricInfo).
type FabricInfo struct {
	// ClusterUUID is the cluster the GPU belongs to, formatted as a UUID (all zeros when
	// the fabric has not assigned one).
	ClusterUUID string
	CliqueID    uint32
	State       FabricState
	// Status is the registration's result; nvml.h says to read it only when State is
	// GPU_FABRIC_STATE_COMPLETED.
	Status Return
	// Health is unknown from nvmlDeviceGetGpuFabricInfo, whose struct has no health mask.
	Health Fact[HealthMask]
	// Summary is known only from an NVML with nvmlGpuFabricInfo_v3.
	Summary Fact[HealthSummary]
	// Version is the version of the struct NVML filled: 1 (nvmlGpuFabricInfo_t), 2 or 3.
	Version int
}

// Registered reports whether the GPU has completed its fabric registration without error.
func (f FabricInfo) Registered() bool {
	return f.State == GPU_FABRIC_STATE_COMPLETED && f.Status == SUCCESS
}

// gpuFabricInfo is nvmlGpuFabricInfo_t, the struct of nvmlDeviceGetGpuFabricInfo.
type gpuFabricInfo struct {
	_           structs.HostLayout
	clusterUUID [16]byte // NVML_GPU_FABRIC_UUID_LEN
	status      int32    // nvmlReturn_t
	cliqueID    uint32
	state       uint8 // nvmlGpuFabricState_t
}

// gpuFabricInfoV3 is nvmlGpuFabricInfo_v3_t (nvmlGpuFabricInfoV_t). nvmlGpuFabricInfo_v2_t
// is the same without healthSummary: its first gpuFabricInfoV2Size bytes.
type gpuFabricInfoV3 struct {
	_             structs.HostLayout
	version       uint32
	clusterUUID   [16]byte
	status        int32
	cliqueID      uint32
	state         uint8
	healthMask    uint32
	healthSummary uint8
}

// The version macros, NVML_STRUCT_VERSION(GpuFabricInfo, v): the struct's size | v << 24.
const (
	gpuFabricInfoV2Size = unsafe.Offsetof(gpuFabricInfoV3{}.healthSummary) // sizeof(nvmlGpuFabricInfo_v2_t)
	gpuFabricInfoV2Ver  = uint32(gpuFabricInfoV2Size) | 2<<24
	gpuFabricInfoV3Ver  = uint32(unsafe.Sizeof(gpuFabricInfoV3{})) | 3<<24
)

// GpuFabricInfo returns the GPU's fabric state, status, clique, cluster and health. It
// asks nvmlDeviceGetGpuFabricInfoV for the newest struct this package knows (v3), then for
// v2 if NVML answers NVML_ERROR_ARGUMENT_VERSION_MISMATCH; an NVML without
// nvmlDeviceGetGpuFabricInfoV is asked through nvmlDeviceGetGpuFabricInfo, which has no
// health mask. A GPU outside any NVLink fabric returns ERROR_NOT_SUPPORTED.
func (d Device) GpuFabricInfo() (FabricInfo, error) {
	if err := d.valid(procDeviceGetGpuFabricInfoV); err != nil {
		return FabricInfo{}, err
	}
	v := &gpuFabricInfoV3{version: gpuFabricInfoV3Ver}
	version := 3
	err := d.lib.call(procDeviceGetGpuFabricInfoV, d.handle, uintptr(unsafe.Pointer(v)))
	if errors.Is(err, ERROR_ARGUMENT_VERSION_MISMATCH) {
		*v, version = gpuFabricInfoV3{version: gpuFabricInfoV2Ver}, 2
		err = d.lib.call(procDeviceGetGpuFabricInfoV, d.handle, uintptr(unsafe.Pointer(v)))
	}
	switch {
	case err == nil:
		return fabricInfoV(v, version), nil
	case !isMissing(err):
		return FabricInfo{}, d.fail(err, procDeviceGetGpuFabricInfoV)
	}
	old := new(gpuFabricInfo)
	if err := d.lib.call(procDeviceGetGpuFabricInfo, d.handle, uintptr(unsafe.Pointer(old))); err != nil {
		return FabricInfo{}, d.fail(err, procDeviceGetGpuFabricInfo)
	}
	v = &gpuFabricInfoV3{clusterUUID: old.clusterUUID, status: old.status, cliqueID: old.cliqueID, state: old.state}
	return fabricInfoV(v, 1), nil
}

// errNoHealthMask is why an nvmlGpuFabricInfo_t has no health.
var errNoHealthMask = &Error{
	Op:  "nvmlDeviceGetGpuFabricInfo",
	Err: wrapText{ERROR_FUNCTION_NOT_FOUND, "nvmlGpuFabricInfo_t has no health mask, and this NVML has no nvmlDeviceGetGpuFabricInfoV"},
}

// fabricInfoV decodes v as the struct of version: what nvmlDeviceGetGpuFabricInfoV wrote
// (2 or 3), or the fields of nvmlGpuFabricInfo_t (1).
func fabricInfoV(v *gpuFabricInfoV3, version int) FabricInfo {
	f := FabricInfo{
		ClusterUUID: formatUUID(v.clusterUUID),
		CliqueID:    v.cliqueID,
		State:       FabricState(v.state),
		Status:      Return(v.status),
		Health:      Known(HealthMask(v.healthMask)),
		Summary:     Known(HealthSummary(v.healthSummary)),
		Version:     version,
	}
	switch version {
	case 1:
		f.Health, f.Summary = Unknown[HealthMask](errNoHealthMask), Unknown[HealthSummary](errNoHealthMask)
	case 2:
		f.Summary = Unknown[HealthSummary](&Error{
			Op:  procDeviceGetGpuFabricInfoV.Symbol().Name,
			Err: wrapText{ERROR_ARGUMENT_VERSION_MISMATCH, "this NVML knows nvmlGpuFabricInfo_v2 only, which has no health summary"},
		})
	}
	return f
}

// isMissing reports whether err says that the library or the entry point is missing.
func isMissing(err error) bool {
	r, ok := ReturnOf(err)
	return ok && (r == ERROR_FUNCTION_NOT_FOUND || r == ERROR_LIBRARY_NOT_FOUND)
}

// wrapText is a Return with a sentence of this package's instead of the header's.
type wrapText struct {
	ret  Return
	text string
}

func (w wrapText) Error() string { return w.ret.Name() + ": " + w.text }
func (w wrapText) Unwrap() error { return w.ret }

func formatUUID(b [16]byte) string {
	s := hex.EncodeToString(b[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}
