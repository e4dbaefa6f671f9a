package nvml

import (
	"unsafe"

	"github.com/cuvmm/cuvmm/loader"
)

// NVLINK_MAX_LINKS is NVML_NVLINK_MAX_LINKS of nvml.h (NVML_API_VERSION 13): the most
// NVLinks a GPU has. Older headers said 18 or 12; an NVML of theirs answers a higher link
// number with NVML_ERROR_INVALID_ARGUMENT.
const NVLINK_MAX_LINKS = 36

// NvLinkDeviceType is an nvmlIntNvLinkDeviceType_t: what is at the other end of an NVLink.
type NvLinkDeviceType uint32

// The nvmlIntNvLinkDeviceType_t values, named as in C less "NVML_".
const (
	NVLINK_DEVICE_TYPE_GPU     NvLinkDeviceType = 0x00
	NVLINK_DEVICE_TYPE_IBMNPU  NvLinkDeviceType = 0x01
	NVLINK_DEVICE_TYPE_SWITCH  NvLinkDeviceType = 0x02
	NVLINK_DEVICE_TYPE_UNKNOWN NvLinkDeviceType = 0xFF
)

// String returns the C name, such as "NVML_NVLINK_DEVICE_TYPE_SWITCH".
func (t NvLinkDeviceType) String() string {
	if t == NVLINK_DEVICE_TYPE_UNKNOWN {
		return "NVML_NVLINK_DEVICE_TYPE_UNKNOWN"
	}
	return cName(t, "NVML_NVLINK_DEVICE_TYPE_", "nvmlIntNvLinkDeviceType_t", "GPU", "IBMNPU", "SWITCH")
}

// NvLinkState reports whether NVLink link is active (nvmlDeviceGetNvLinkState:
// NVML_FEATURE_ENABLED). A link number the GPU does not have returns
// ERROR_INVALID_ARGUMENT; a GPU without NVLink, ERROR_NOT_SUPPORTED.
func (d Device) NvLinkState(link int) (bool, error) {
	v := new(uint32)
	err := d.linkCall(procDeviceGetNvLinkState, link, v, 0)
	return *v == nvmlFeatureEnabled, err
}

// nvmlEnableState_t.
const nvmlFeatureEnabled = 1 // NVML_FEATURE_ENABLED

// NvLinkRemoteDeviceType returns what is at the other end of NVLink link
// (nvmlDeviceGetNvLinkRemoteDeviceType): NVLINK_DEVICE_TYPE_SWITCH for an NVSwitch.
func (d Device) NvLinkRemoteDeviceType(link int) (NvLinkDeviceType, error) {
	v := new(uint32)
	err := d.linkCall(procDeviceGetNvLinkRemoteDevType, link, v, uint32(NVLINK_DEVICE_TYPE_UNKNOWN))
	return NvLinkDeviceType(*v), err
}

// linkCall checks d and the link number, then calls p(device, link, out), setting *out to
// zero if that fails. The out-parameter is given so that a probe of every link allocates
// one.
func (d Device) linkCall(p *loader.Proc, link int, out *uint32, zero uint32) error {
	if err := d.valid(p); err != nil {
		return err
	}
	if link < 0 || link >= NVLINK_MAX_LINKS {
		return wrap(ERROR_INVALID_ARGUMENT, p, "device %d, link %d: links are 0 to %d", d.index, link, NVLINK_MAX_LINKS-1)
	}
	if err := d.lib.call(p, d.handle, uintptr(link), uintptr(unsafe.Pointer(out))); err != nil {
		*out = zero
		return wrap(err, p, "device %d, link %d", d.index, link)
	}
	return nil
}
