package vmm

import (
	"github.com/cuvmm/cuvmm/cu"
)

// Backend is the driver's virtual memory management surface, one method per driver call.
// The real driver implements it ([CUDA]) and so does the simulator (package sim). Every
// error a Backend returns for a driver failure wraps the driver's [cu.Result], so
// cu.ResultOf and errors.Is(err, cu.ERROR_INVALID_VALUE) work the same on both.
//
// Devices are named by ordinal. Handle values are those the backend returned; a Backend
// rejects any other value with an error matching cu.ERROR_INVALID_VALUE instead of
// passing it on (the real driver would crash). Implementations are safe for concurrent use.
//
// Each method's doc names the driver calls it makes; backend_test.go checks the names
// against cu's prototypes and the [CUDA] forwarders, and sim's tests check its operation
// names (sim.FailNth, Stats.Calls) against the method list. A method whose line ends with
// what it calls, a function of package cu (// cu.MemAddressFree) or a method of the
// cu.Device or the primary cu.Context of its ordinal (// cu.Context.CopyHtoD), has its CUDA
// forwarder generated (zcuda.go, by go generate ./cu).
//
// Most programs use the typed layer, [Manager], rather than a Backend directly.
type Backend interface {
	// Name is "cuda" for the real driver, "sim" for the simulator.
	Name() string
	// DriverVersion is the CUDA version the driver supports (13000 for 13.0):
	// cuDriverGetVersion.
	DriverVersion() (int, error) // cu.DriverVersion

	// DeviceCount is cuDeviceGetCount.
	DeviceCount() (int, error) // cu.DeviceCount
	// Device describes a device: cuDeviceGetName, cuDeviceGetUuid, cuDeviceGetPCIBusId,
	// cuDeviceTotalMem and cuDeviceGetAttribute.
	Device(ordinal int) (DeviceInfo, error)
	// Attribute is cuDeviceGetAttribute.
	Attribute(ordinal int, a cu.DeviceAttribute) (int, error) // cu.Device.Attribute
	// CanAccessPeer is cuDeviceCanAccessPeer.
	CanAccessPeer(ordinal, peer int) (bool, error)
	// P2PAttribute is cuDeviceGetP2PAttribute.
	P2PAttribute(a cu.P2PAttribute, src, dst int) (int, error)

	// Granularity is cuMemGetAllocationGranularity.
	Granularity(prop *cu.MemAllocationProp, option cu.MemAllocationGranularityFlags) (uint64, error) // cu.MemGetAllocationGranularity
	// Create is cuMemCreate.
	Create(size uint64, prop *cu.MemAllocationProp, flags uint64) (cu.MemHandle, error) // cu.MemCreate
	// Release is cuMemRelease.
	Release(h cu.MemHandle) error // cu.MemRelease
	// Retain is cuMemRetainAllocationHandle.
	Retain(addr cu.DevicePtr) (cu.MemHandle, error) // cu.MemRetainAllocationHandle
	// Properties is cuMemGetAllocationPropertiesFromHandle.
	Properties(h cu.MemHandle) (cu.MemAllocationProp, error) // cu.MemGetAllocationPropertiesFromHandle

	// Reserve is cuMemAddressReserve.
	Reserve(size, alignment uint64, hint cu.DevicePtr, flags uint64) (cu.DevicePtr, error) // cu.MemAddressReserve
	// Free is cuMemAddressFree.
	Free(ptr cu.DevicePtr, size uint64) error // cu.MemAddressFree
	// Map is cuMemMap.
	Map(ptr cu.DevicePtr, size, offset uint64, h cu.MemHandle, flags uint64) error // cu.MemMap
	// Unmap is cuMemUnmap.
	Unmap(ptr cu.DevicePtr, size uint64) error // cu.MemUnmap
	// SetAccess is cuMemSetAccess.
	SetAccess(ptr cu.DevicePtr, size uint64, desc []cu.MemAccessDesc) error // cu.MemSetAccess
	// GetAccess is cuMemGetAccess.
	GetAccess(loc cu.MemLocation, ptr cu.DevicePtr) (cu.MemAccessFlags, error) // cu.MemGetAccess
	// AddressRange is cuMemGetAddressRange.
	AddressRange(ptr cu.DevicePtr) (base cu.DevicePtr, size uint64, err error)

	// ExportFD is cuMemExportToShareableHandle for POSIX file descriptors; the caller owns
	// the descriptor.
	ExportFD(h cu.MemHandle) (int, error) // cu.MemExportToFD
	// ImportFD is cuMemImportFromShareableHandle for POSIX file descriptors; the descriptor
	// stays the caller's.
	ImportFD(fd int) (cu.MemHandle, error) // cu.MemImportFromFD
	// ExportFabric is cuMemExportToShareableHandle for fabric handles.
	ExportFabric(h cu.MemHandle) (cu.MemFabricHandle, error) // cu.MemExportToFabric
	// ImportFabric is cuMemImportFromShareableHandle for fabric handles.
	ImportFabric(fh cu.MemFabricHandle) (cu.MemHandle, error) // cu.MemImportFromFabric
	// ExportWin32 is cuMemExportToShareableHandle for MEM_HANDLE_TYPE_WIN32 or
	// MEM_HANDLE_TYPE_WIN32_KMT.
	ExportWin32(h cu.MemHandle, t cu.MemHandleType) (uintptr, error) // cu.MemExportToWin32
	// ImportWin32 is cuMemImportFromShareableHandle for the same two handle types.
	ImportWin32(handle uintptr, t cu.MemHandleType) (cu.MemHandle, error) // cu.MemImportFromWin32
	// ExportDmaBuf is cuMemGetHandleForAddressRange with MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: a
	// dma-buf file descriptor for the device memory [ptr, ptr+size), which the caller owns
	// (for an RDMA NIC: ibv_reg_dmabuf_mr). flags is 0 or
	// cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE. Linux only.
	ExportDmaBuf(ptr cu.DevicePtr, size, flags uint64) (int, error)

	// MulticastGranularity is cuMulticastGetGranularity.
	MulticastGranularity(prop *cu.MulticastObjectProp, option cu.MulticastGranularityFlags) (uint64, error) // cu.MulticastGetGranularity
	// MulticastCreate is cuMulticastCreate.
	MulticastCreate(prop *cu.MulticastObjectProp) (cu.MemHandle, error) // cu.MulticastCreate
	// MulticastAddDevice is cuMulticastAddDevice.
	MulticastAddDevice(mc cu.MemHandle, ordinal int) error // cu.MulticastAddDevice
	// MulticastBindMem is cuMulticastBindMem.
	MulticastBindMem(mc cu.MemHandle, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error // cu.MulticastBindMem
	// MulticastBindAddr is cuMulticastBindAddr.
	MulticastBindAddr(mc cu.MemHandle, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error // cu.MulticastBindAddr
	// MulticastBindMemV2 is cuMulticastBindMem_v2 (CUDA 13.1): the bind for device ordinal,
	// which host NUMA memory needs. A driver without the call fails, once the ordinal is
	// known to be a device, with an error matching loader.ErrNotSupported (and
	// cu.ERROR_NOT_SUPPORTED), whatever the other arguments.
	MulticastBindMemV2(mc cu.MemHandle, ordinal int, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error // cu.MulticastBindMemV2
	// MulticastBindAddrV2 is cuMulticastBindAddr_v2 (CUDA 13.1), and fails as
	// MulticastBindMemV2 does on a driver without it.
	MulticastBindAddrV2(mc cu.MemHandle, ordinal int, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error // cu.MulticastBindAddrV2
	// MulticastUnbind is cuMulticastUnbind.
	MulticastUnbind(mc cu.MemHandle, ordinal int, mcOffset, size uint64) error // cu.MulticastUnbind

	// PointerAttributes is cuPointerGetAttributes, for the attributes of
	// cu.PointerAttributeSet, asked from the primary context of device ordinal (Access is
	// that device's access). An address the driver does not know reports zeros (MemoryType
	// 0), not an error.
	PointerAttributes(ordinal int, ptr cu.DevicePtr) (cu.PointerAttributes, error) // cu.Context.PointerAttributes

	// Synchronous copies and memset, issued from the primary context of device ordinal.

	// CopyHtoD is cuMemcpyHtoD.
	CopyHtoD(ordinal int, dst cu.DevicePtr, src []byte) error // cu.Context.CopyHtoD
	// CopyDtoH is cuMemcpyDtoH.
	CopyDtoH(ordinal int, dst []byte, src cu.DevicePtr) error // cu.Context.CopyDtoH
	// CopyDtoD is cuMemcpyDtoD.
	CopyDtoD(ordinal int, dst, src cu.DevicePtr, size uint64) error // cu.Context.CopyDtoD
	// MemsetD8 is cuMemsetD8.
	MemsetD8(ordinal int, dst cu.DevicePtr, v uint8, n uint64) error // cu.Context.MemsetD8
}

// DeviceInfo describes one device.
type DeviceInfo struct {
	Ordinal      int
	Name         string
	UUID         cu.UUID
	PCIBusID     string
	TotalMem     uint64
	ComputeMajor int
	ComputeMinor int
}
