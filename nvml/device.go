package nvml

import (
	"bytes"
	"strings"
	"structs"
	"unsafe"

	"github.com/cuvmm/cuvmm/loader"
)

// Buffer sizes of nvml.h (nvmlConstants): each is "guaranteed to be large enough" for its
// string, NUL included.
const (
	systemDriverVersionBufferSize = 80 // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
	deviceNameV2BufferSize        = 96 // NVML_DEVICE_NAME_V2_BUFFER_SIZE
	deviceUUIDV2BufferSize        = 96 // NVML_DEVICE_UUID_V2_BUFFER_SIZE
)

// Init initializes NVML (nvmlInit_v2). NVML counts its initializations: every successful
// Init needs one Shutdown.
func Init() error { return system.init() }

// Shutdown undoes one Init (nvmlShutdown).
func Shutdown() error { return system.shutdown() }

// SystemGetDriverVersion returns the version of the NVIDIA driver, such as "580.65.06"
// (nvmlSystemGetDriverVersion).
func SystemGetDriverVersion() (string, error) { return system.driverVersion() }

// SystemGetCudaDriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (nvmlSystemGetCudaDriverVersion_v2, which asks libcuda).
func SystemGetCudaDriverVersion() (int, error) { return system.cudaDriverVersion() }

// DeviceGetCount returns the number of GPUs NVML sees (nvmlDeviceGetCount_v2): all of the
// node's, whatever CUDA_VISIBLE_DEVICES says.
func DeviceGetCount() (int, error) { return system.deviceCount() }

// DeviceGetHandleByIndex returns the GPU with NVML index i (nvmlDeviceGetHandleByIndex_v2).
func DeviceGetHandleByIndex(i int) (Device, error) { return system.deviceByIndex(i) }

func (l *library) init() error {
	return wrap(l.call(procInit), procInit, "")
}

func (l *library) shutdown() error {
	return wrap(l.call(procShutdown), procShutdown, "")
}

func (l *library) driverVersion() (string, error) {
	buf := make([]byte, systemDriverVersionBufferSize)
	err := l.call(procSystemGetDriverVersion, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if err != nil {
		return "", wrap(err, procSystemGetDriverVersion, "")
	}
	return cString(buf), nil
}

func (l *library) cudaDriverVersion() (int, error) {
	v := new(int32)
	if err := l.call(procSystemGetCudaDriverVersion, uintptr(unsafe.Pointer(v))); err != nil {
		return 0, wrap(err, procSystemGetCudaDriverVersion, "")
	}
	return int(*v), nil
}

func (l *library) deviceCount() (int, error) {
	n := new(uint32)
	if err := l.call(procDeviceGetCount, uintptr(unsafe.Pointer(n))); err != nil {
		return 0, wrap(err, procDeviceGetCount, "")
	}
	if *n > maxDevices {
		return 0, wrap(ERROR_UNKNOWN, procDeviceGetCount, "%d devices, more than any node has", *n)
	}
	return int(*n), nil
}

// maxDevices bounds the device count NVML reports: a larger one is garbage, and a probe
// would otherwise allocate and loop for it.
const maxDevices = 1024

func (l *library) deviceByIndex(i int) (Device, error) {
	if i < 0 || i >= maxDevices {
		return Device{}, wrap(ERROR_INVALID_ARGUMENT, procDeviceGetHandleByIndex, "%d", i)
	}
	h := new(uintptr)
	if err := l.call(procDeviceGetHandleByIndex, uintptr(i), uintptr(unsafe.Pointer(h))); err != nil {
		return Device{}, wrap(err, procDeviceGetHandleByIndex, "%d", i)
	}
	if *h == 0 {
		return Device{}, wrap(ERROR_UNKNOWN, procDeviceGetHandleByIndex, "%d: NULL handle", i)
	}
	return Device{lib: l, handle: *h, index: i}, nil
}

// Device is a GPU as NVML knows it (an nvmlDevice_t), from DeviceGetHandleByIndex.
type Device struct {
	lib    *library
	handle uintptr // nvmlDevice_t: a pointer NVML owns, passed back as it came
	index  int
}

// Index is the NVML index d was got with.
func (d Device) Index() int { return d.index }

// valid guards the methods of a Device that did not come from DeviceGetHandleByIndex.
func (d Device) valid(p *loader.Proc) error {
	if d.lib == nil || d.handle == 0 {
		return wrap(ERROR_INVALID_ARGUMENT, p, "a Device not from DeviceGetHandleByIndex")
	}
	return nil
}

// fail names the call p of a failed call on d.
func (d Device) fail(err error, p *loader.Proc) error { return wrap(err, p, "device %d", d.index) }

// Name returns the product name, such as "NVIDIA H200" (nvmlDeviceGetName).
func (d Device) Name() (string, error) { return d.str(procDeviceGetName, deviceNameV2BufferSize) }

// UUID returns the GPU's UUID, such as "GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632"
// (nvmlDeviceGetUUID).
func (d Device) UUID() (string, error) { return d.str(procDeviceGetUUID, deviceUUIDV2BufferSize) }

// str calls p(device, buf, len(buf)) and returns the string it wrote.
func (d Device) str(p *loader.Proc, size int) (string, error) {
	if err := d.valid(p); err != nil {
		return "", err
	}
	buf := make([]byte, size)
	if err := d.lib.call(p, d.handle, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf))); err != nil {
		return "", d.fail(err, p)
	}
	return cString(buf), nil
}

// pciInfo is nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it.
type pciInfo struct {
	_              structs.HostLayout
	busIDLegacy    [16]byte // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
	domain         uint32
	bus            uint32
	device         uint32
	pciDeviceID    uint32
	pciSubSystemID uint32
	busID          [32]byte // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
}

// PciBusID returns the PCI bus id, such as "00000000:18:00.0" (domain:bus:device.function;
// NVML writes the domain with eight digits, CUDA with four), from nvmlDeviceGetPciInfo_v3.
func (d Device) PciBusID() (string, error) {
	if err := d.valid(procDeviceGetPciInfo); err != nil {
		return "", err
	}
	pci := new(pciInfo)
	if err := d.lib.call(procDeviceGetPciInfo, d.handle, uintptr(unsafe.Pointer(pci))); err != nil {
		return "", d.fail(err, procDeviceGetPciInfo)
	}
	return cString(pci.busID[:]), nil
}

// cString is the NUL-terminated string at the start of b, all of b if NVML left no NUL,
// with bytes that are not UTF-8 replaced: it ends up in reports and JSON.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
