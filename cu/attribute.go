package cu

import "strconv"

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
