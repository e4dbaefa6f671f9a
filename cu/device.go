package cu

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// Device is a CUdevice: the driver's handle of one GPU, obtained from [DeviceGet].
type Device int32

// UUID is a device's 16-byte CUuuid.
type UUID [16]byte

// String formats u as nvidia-smi does: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func (u UUID) String() string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// ParseUUID reads a UUID as String writes it (the "GPU-" prefix optional, hex digits in
// either case).
func ParseUUID(s string) (UUID, error) {
	var u UUID
	h := strings.TrimPrefix(s, "GPU-")
	groups := strings.Split(h, "-")
	if len(groups) != 5 || len(groups[0]) != 8 || len(groups[1]) != 4 || len(groups[2]) != 4 || len(groups[3]) != 4 || len(groups[4]) != 12 {
		return u, fmt.Errorf("%q is not a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", s)
	}
	if _, err := hex.Decode(u[:], []byte(strings.Join(groups, ""))); err != nil {
		return UUID{}, fmt.Errorf("%q is not a GPU UUID: %w", s, err)
	}
	return u, nil
}

// DeviceCount returns the number of CUDA devices, initializing the driver if needed.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	n, err := cuDeviceGetCount()
	if err != nil {
		return 0, wrap(err, "cuDeviceGetCount", "")
	}
	return int(n), nil
}

// DeviceGet returns the device of an ordinal in [0, DeviceCount()).
func DeviceGet(ordinal int) (Device, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if ordinal < 0 || ordinal > 1<<30 {
		return 0, wrap(ERROR_INVALID_DEVICE, "cuDeviceGet", "%d", ordinal)
	}
	d, err := cuDeviceGet(int32(ordinal))
	if err != nil {
		return 0, wrap(err, "cuDeviceGet", "%d", ordinal)
	}
	return d, nil
}

// Name returns the device's product name.
func (d Device) Name() (string, error) { return d.str(cuDeviceGetName, "cuDeviceGetName", 256) }

// PCIBusID returns the device's PCI address, domain:bus:device.function.
func (d Device) PCIBusID() (string, error) {
	return d.str(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", 64)
}

// str returns the NUL-terminated string that the call op writes into a buffer of size bytes.
func (d Device) str(call func(unsafe.Pointer, int32, Device) error, op string, size int) (string, error) {
	buf := make([]byte, size)
	if err := call(unsafe.Pointer(&buf[0]), int32(len(buf)), d); err != nil {
		return "", wrap(err, op, "%d", d)
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int32

// String returns the C name of a, such as "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING", or
// "CUdevice_attribute(N)" for an attribute this package does not know. Of deprecated
// spellings sharing a value, the current name is returned.
func (a DeviceAttribute) String() string {
	if n, ok := attributeName(a); ok {
		return n
	}
	return "CUdevice_attribute(" + strconv.Itoa(int(a)) + ")"
}

// Description returns the one-line description of a from the CUDA header, or "Unknown
// device attribute" for an attribute this package does not know.
func (a DeviceAttribute) Description() string {
	if d, ok := attributeDescription(a); ok {
		return d
	}
	return "Unknown device attribute"
}

// DeviceAttributes returns every attribute this package knows, once each, in ascending order.
// A driver older than the header the package was generated from rejects the newest ones
// with ERROR_INVALID_VALUE.
func DeviceAttributes() []DeviceAttribute {
	return append([]DeviceAttribute(nil), allAttributes...)
}

// Attribute returns one device attribute.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	v, err := cuDeviceGetAttribute(a, d)
	if err != nil {
		return 0, wrap(err, "cuDeviceGetAttribute", "%v, device %d", a, d)
	}
	return int(v), nil
}

// Flag returns a boolean attribute: true when its value is non-zero.
func (d Device) Flag(a DeviceAttribute) (bool, error) {
	v, err := d.Attribute(a)
	return v != 0, err
}

// ComputeCapability returns the device's major and minor compute capability.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR); err != nil {
		return 0, 0, err
	}
	minor, err = d.Attribute(DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
	return major, minor, err
}

// CanAccessPeer reports whether d can access memory of peer (cuDeviceCanAccessPeer).
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	v, err := cuDeviceCanAccessPeer(d, peer)
	if err != nil {
		return false, wrap(err, "cuDeviceCanAccessPeer", "%d, %d", d, peer)
	}
	return v != 0, nil
}

// P2PAttribute returns an attribute of the link from d to dst (cuDeviceGetP2PAttribute).
func (d Device) P2PAttribute(a P2PAttribute, dst Device) (int, error) {
	v, err := cuDeviceGetP2PAttribute(a, d, dst)
	if err != nil {
		return 0, wrap(err, "cuDeviceGetP2PAttribute", "%d, %d -> %d", a, d, dst)
	}
	return int(v), nil
}
