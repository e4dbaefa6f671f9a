package cu

// The driver calls cu makes, one prototype line each, and the enums it takes from cuda.h.
// internal/cmd/mkcu reads these lines (go generate ./cu) and writes zprocs.go (the proc
// table), zcalls.go (one function per line, which builds the call's frame and makes it) and
// zvmmtypes.go (the enums). CONTRIBUTING.md walks through adding a call.
//
// A call line is
//
//	//cu <C symbol>[ as <Go name>](<parameters>) v<ABI version>
//
// with the parameters in the C order, each one of:
//
//	name T           a value: an integer type, cu's or predeclared, of the C type's size; an
//	                 8-byte one for a number the C API takes as void * (a device address, a
//	                 descriptor); uintptr for any C pointer the caller has made safe to pass
//	                 (heap memory it keeps alive, or no memory at all)
//	name MemHandle   a handle: the generated function pins it in the handle table for the
//	                 call and passes the driver's value (a released or unknown handle fails
//	                 with ErrUnknownHandle and never reaches the driver)
//	name *T          a struct the driver reads: copied into the frame
//	name []T         an array the driver reads and, as the next C parameter, its length;
//	                 copied into the frame when it fits, passed kept alive otherwise
//	name unsafe.Pointer  memory the caller owns (a user's buffer): the call keeps it alive,
//	                 at the cost of an allocation
//	out name T       a T the driver writes: the generated function returns it (an out
//	                 MemHandle is recorded in the handle table: the function returns cu's
//	                 handle for it)
//
// The Go name defaults to the C symbol, so the generated function is unexported; "as"
// names the variants of a call whose void* parameters take different types. The ABI version
// is that of cudaTypedefs.h's PFN_<symbol>_v<version>: the proc table asks the driver for
// exactly that version. mkcu checks every line against cuda.h (the number of parameters,
// which are pointers, the size of each value and of what each pointer points to) and, when
// it has cudaTypedefs.h, the version; it fails naming the symbol when they disagree. The
// order of the lines is the order of the proc table, which Symbols returns (and vmmprobe
// lists).
//
// A call newer than the header cuvmm is generated from (CUDA 13.0) is marked optional, and
// its C declaration, as NVIDIA documents it, follows on a line of its own:
//
//	//cu <C symbol>(<parameters>) v<ABI version> optional
//	//cu:decl CUresult CUDAAPI <C symbol>(<C parameters>);
//
// optional says that drivers cuvmm supports may lack the symbol: cu calls it only where the
// driver has it (OptionalSymbol reports the mark, and vmmprobe does not count such a
// symbol as missing). The //cu:decl line stands in for the header's declaration, so the
// parameters are still checked, against the header's types; once the header declares the
// function, mkcu checks that the two agree (and the line can go). Say in a comment where
// the declaration comes from.
//
// An enum line is
//
//	//cu:enum <Go type> <C enum typedef>   typed constants, the C names less "CU_"
//	//cu:enum - <C enum typedef>           the same, untyped (for fields of another width)
//	//cu:define <C macro>...               untyped constants from #defines
//
// The generated functions return the driver's Result (or the symbol's error, or
// ErrUnknownHandle) unwrapped: the exported wrappers call Init, check arguments and name
// the operation (wrap).

// Initialization and versions (init.go).
//cu cuInit(flags uint32) v2000
//cu cuDriverGetVersion(out version int32) v2020

// Devices (device.go).
//cu cuDeviceGet(out device Device, ordinal int32) v2000
//cu cuDeviceGetCount(out count int32) v2000
//cu cuDeviceGetName(name unsafe.Pointer, length int32, dev Device) v2000
//cu cuDeviceGetUuid(out uuid UUID, dev Device) v11040
//cu cuDeviceGetPCIBusId(busID unsafe.Pointer, length int32, dev Device) v4010
//cu cuDeviceTotalMem(out bytes uint64, dev Device) v3020
//cu cuDeviceGetAttribute(out value int32, attrib DeviceAttribute, dev Device) v2000
//cu cuDeviceCanAccessPeer(out canAccess int32, dev Device, peer Device) v4000
//cu cuDeviceGetP2PAttribute(out value int32, attrib P2PAttribute, src Device, dst Device) v8000
//cu:enum P2PAttribute CUdevice_P2PAttribute

// Primary contexts (context.go).
//cu cuDevicePrimaryCtxRetain(out ctx uintptr, dev Device) v7000
//cu cuDevicePrimaryCtxRelease(dev Device) v11000
//cu cuCtxSetCurrent(ctx uintptr) v4000
//cu cuCtxGetCurrent(out ctx uintptr) v4000
//cu cuCtxSynchronize() v2000

// Classic memory and copies (memory.go).
//cu cuMemGetInfo(out free uint64, out total uint64) v3020
//cu cuMemAlloc(out ptr DevicePtr, size uint64) v3020
//cu cuMemFree(ptr DevicePtr) v3020
//cu cuMemcpyHtoD(dst DevicePtr, src unsafe.Pointer, size uint64) v3020
//cu cuMemcpyDtoH(dst unsafe.Pointer, src DevicePtr, size uint64) v3020
//cu cuMemcpyDtoD(dst DevicePtr, src DevicePtr, size uint64) v3020
//cu cuMemsetD8(dst DevicePtr, value uint8, count uint64) v3020
//cu cuMemsetD32(dst DevicePtr, value uint32, count uint64) v3020
//cu cuMemGetAddressRange(out base DevicePtr, out size uint64, ptr DevicePtr) v3020

// Pointer attributes (pointer.go). attributes is an array of numAttributes attributes and
// data one of as many pointers to where the driver writes each value: pointer.go lays
// both out in one heap object that the call keeps alive.
//cu cuPointerGetAttributes(numAttributes uint32, attributes unsafe.Pointer, data unsafe.Pointer, ptr DevicePtr) v7000
//cu:enum PointerAttribute CUpointer_attribute
//cu:enum MemoryType CUmemorytype
//cu:enum PointerAccessFlags CUDA_POINTER_ATTRIBUTE_ACCESS_FLAGS

// Virtual memory management (vmm.go). Release, map, unmap and retain take and give the
// driver's values: handles.go and mappings.go do their bookkeeping around the call.
//cu cuMemAddressReserve(out ptr DevicePtr, size uint64, alignment uint64, hint DevicePtr, flags uint64) v10020
//cu cuMemAddressFree(ptr DevicePtr, size uint64) v10020
//cu cuMemCreate(out handle MemHandle, size uint64, prop *MemAllocationProp, flags uint64) v10020
//cu cuMemRelease(handle uint64) v10020
//cu cuMemMap(ptr DevicePtr, size uint64, offset uint64, handle uint64, flags uint64) v10020
//cu cuMemUnmap(ptr DevicePtr, size uint64) v10020
//cu cuMemSetAccess(ptr DevicePtr, size uint64, desc []MemAccessDesc) v10020
//cu cuMemGetAccess(out flags uint64, location *MemLocation, ptr DevicePtr) v10020
//cu cuMemExportToShareableHandle as memExportToFD(out fd int32, handle MemHandle, handleType MemHandleType, flags uint64) v10020
//cu cuMemExportToShareableHandle as memExportToFabric(out fh MemFabricHandle, handle MemHandle, handleType MemHandleType, flags uint64) v10020
//cu cuMemExportToShareableHandle as memExportToWin32(out win32 uintptr, handle MemHandle, handleType MemHandleType, flags uint64) v10020
//cu cuMemImportFromShareableHandle as memImportFromValue(out handle MemHandle, osHandle uintptr, handleType MemHandleType) v10020
//cu cuMemImportFromShareableHandle as memImportFromFabric(out handle MemHandle, fh *MemFabricHandle, handleType MemHandleType) v10020
//cu cuMemGetAllocationGranularity(out granularity uint64, prop *MemAllocationProp, option MemAllocationGranularityFlags) v10020
//cu cuMemGetAllocationPropertiesFromHandle(out prop MemAllocationProp, handle MemHandle) v10020
//cu cuMemRetainAllocationHandle(out handle uint64, address DevicePtr) v11000
//cu cuMemGetHandleForAddressRange(out handle int32, ptr DevicePtr, size uint64, handleType MemRangeHandleType, flags uint64) v11070
//cu:enum MemAllocationType CUmemAllocationType
//cu:enum MemLocationType CUmemLocationType
//cu:enum MemHandleType CUmemAllocationHandleType
//cu:enum MemAccessFlags CUmemAccess_flags
//cu:enum MemAllocationGranularityFlags CUmemAllocationGranularity_flags
//cu:enum - CUmemAllocationCompType
//cu:define CU_MEM_CREATE_USAGE_TILE_POOL CU_MEM_CREATE_USAGE_HW_DECOMPRESS
//cu:enum MemRangeHandleType CUmemRangeHandleType
//cu:enum - CUmemRangeFlags

// Multicast objects (multicast.go).
//cu cuMulticastCreate(out handle MemHandle, prop *MulticastObjectProp) v12010
//cu cuMulticastAddDevice(mc MemHandle, dev Device) v12010
//cu cuMulticastBindMem(mc MemHandle, mcOffset uint64, mem MemHandle, memOffset uint64, size uint64, flags uint64) v12010
//cu cuMulticastBindAddr(mc MemHandle, mcOffset uint64, ptr DevicePtr, size uint64, flags uint64) v12010
//cu cuMulticastUnbind(mc MemHandle, dev Device, mcOffset uint64, size uint64) v12010
//cu cuMulticastGetGranularity(out granularity uint64, prop *MulticastObjectProp, option MulticastGranularityFlags) v12010
//cu:enum MulticastGranularityFlags CUmulticastGranularity_flags

// The binds of CUDA 13.1 that name the device the binding is for (multicast.go), which host
// NUMA memory needs. The 13.0 header has neither: the declarations are those of NVIDIA's
// CUDA Driver API reference for 13.1 (docs.nvidia.com/cuda/cuda-driver-api, "Multicast
// Object Management"), and 13010 is the version cuda-python 13.1's driver bindings resolve
// them at (cuGetProcAddress_v2("cuMulticastBindMem_v2", ..., 13010, ...)). Both have seven
// parameters, so they go through callN.
//cu cuMulticastBindMem_v2(mc MemHandle, dev Device, mcOffset uint64, mem MemHandle, memOffset uint64, size uint64, flags uint64) v13010 optional
//cu:decl CUresult CUDAAPI cuMulticastBindMem_v2(CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset, CUmemGenericAllocationHandle memHandle, size_t memOffset, size_t size, unsigned long long flags);
//cu cuMulticastBindAddr_v2(mc MemHandle, dev Device, mcOffset uint64, ptr DevicePtr, size uint64, flags uint64) v13010 optional
//cu:decl CUresult CUDAAPI cuMulticastBindAddr_v2(CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset, CUdeviceptr memptr, size_t size, unsigned long long flags);

// Modules and kernel launch (module.go). cuLaunchKernel's eleven parameters go through
// purego.SyscallN; its pointers are to pinned heap memory the caller keeps alive.
//cu cuModuleLoadData(out module uintptr, image unsafe.Pointer) v2000
//cu cuModuleGetFunction(out fn uintptr, module uintptr, name unsafe.Pointer) v2000
//cu cuModuleUnload(module uintptr) v2000
//cu cuLaunchKernel(fn uintptr, gridX uint32, gridY uint32, gridZ uint32, blockX uint32, blockY uint32, blockZ uint32, sharedMem uint32, stream uintptr, params uintptr, extra uintptr) v4000
