package nvml

import (
	"strconv"
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
	switch t {
	case NVLINK_DEVICE_TYPE_GPU:
		return "NVML_NVLINK_DEVICE_TYPE_GPU"
	case NVLINK_DEVICE_TYPE_IBMNPU:
		return "NVML_NVLINK_DEVICE_TYPE_IBMNPU"
	case NVLINK_DEVICE_TYPE_SWITCH:
		return "NVML_NVLINK_DEVICE_TYPE_SWITCH"
	case NVLINK_DEVICE_TYPE_UNKNOWN:
		return "NVML_NVLINK_DEVICE_TYPE_UNKNOWN"
	}
	return "nvmlIntNvLinkDeviceType_t(" + strconv.Itoa(int(t)) + ")"
}

// NvLinkState reports whether NVLink link is active (nvmlDeviceGetNvLinkState:
// NVML_FEATURE_ENABLED). A link number the GPU does not have returns
// ERROR_INVALID_ARGUMENT; a GPU without NVLink, ERROR_NOT_SUPPORTED.
func (d Device) NvLinkState(link int) (bool, error) {
	v := new(uint32)
	err := d.nvLinkState(link, v)
	return *v == nvmlFeatureEnabled, err
}

// nvmlEnableState_t.
const nvmlFeatureEnabled = 1 // NVML_FEATURE_ENABLED

// nvLinkState is NvLinkState with the out-parameter given, so that a probe of every link
// allocates one.
func (d Device) nvLinkState(link int, out *uint32) error {
	if err := d.link(procDeviceGetNvLinkState, link); err != nil {
		return err
	}
	if err := d.lib.call(procDeviceGetNvLinkState, d.handle, uintptr(link), uintptr(unsafe.Pointer(out))); err != nil {
		*out = 0
		return wrap(err, procDeviceGetNvLinkState, "device %d, link %d", d.index, link)
	}
	return nil
}

// NvLinkRemoteDeviceType returns what is at the other end of NVLink link
// (nvmlDeviceGetNvLinkRemoteDeviceType): NVLINK_DEVICE_TYPE_SWITCH for an NVSwitch.
func (d Device) NvLinkRemoteDeviceType(link int) (NvLinkDeviceType, error) {
	v := new(uint32)
	err := d.nvLinkRemoteDeviceType(link, v)
	return NvLinkDeviceType(*v), err
}

func (d Device) nvLinkRemoteDeviceType(link int, out *uint32) error {
	if err := d.link(procDeviceGetNvLinkRemoteDevType, link); err != nil {
		return err
	}
	if err := d.lib.call(procDeviceGetNvLinkRemoteDevType, d.handle, uintptr(link), uintptr(unsafe.Pointer(out))); err != nil {
		*out = uint32(NVLINK_DEVICE_TYPE_UNKNOWN)
		return wrap(err, procDeviceGetNvLinkRemoteDevType, "device %d, link %d", d.index, link)
	}
	return nil
}

// link checks d and a link number before a call on them.
func (d Device) link(p *loader.Proc, link int) error {
	if err := d.valid(p); err != nil {
		return err
	}
	if link < 0 || link >= NVLINK_MAX_LINKS {
		return wrap(ERROR_INVALID_ARGUMENT, p, "device %d, link %d: links are 0 to %d", d.index, link, NVLINK_MAX_LINKS-1)
	}
	return nil
}
