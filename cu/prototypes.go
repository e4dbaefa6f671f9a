package cu

// The driver calls cu makes, one prototype line each, and the enums it takes from cuda.h.
// internal/cmd/mkcu reads these lines (go generate ./cu) and writes zprocs.go (the proc
// table), zcalls.go (one function per line, which builds the call's frame and makes it),
// zvmmtypes.go (the enums) and zwrappers.go (the exported wrappers of //cu:export lines);
// from vmm/backend.go it writes vmm/zcuda.go (the Backend's forwarders to cu).
// CONTRIBUTING.md walks through adding a call.
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
// A call whose exported wrapper only calls Init and names the call and its arguments in its
// error has that wrapper generated, from a line after the //cu line (and its //cu:decl
// line) and, right after it, the wrapper's doc comment:
//
//	//cu:export <Go name> "<format>" <parameter>...
//	// <Go name> ...
//
// The wrapper takes the //cu line's parameters (a *T by value) and returns its outs; named
// Type.Name, it is a method of the first parameter of type Type. It looks for an optional
// symbol first, calls Init unless it takes a MemHandle or a Device (which only an
// initialized driver gives), makes the call and, on failure, returns an *Error naming the C
// symbol and the arguments, formatted as by fmt.Sprintf(format, parameters...): for
// MemAddressFree's line below, "cu: cuMemAddressFree(0x7f0000000000, 2097152): ...". A
// wrapper with more to do (check its arguments, convert what it returns, keep the handle
// table's books, run through a Context) is written by hand, in the file its group names.
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
//cu:export Device.UUID "%d" dev
// UUID returns the device's UUID (cuDeviceGetUuid_v2: the same value nvidia-smi shows, also
// under MIG).
//cu cuDeviceGetPCIBusId(busID unsafe.Pointer, length int32, dev Device) v4010
//cu cuDeviceTotalMem(out bytes uint64, dev Device) v3020
//cu:export Device.TotalMem "%d" dev
// TotalMem returns the device's memory in bytes.
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
//cu:export MemAddressReserve "size %d, alignment %d, hint %v, flags %d" size alignment hint flags
// MemAddressReserve reserves size bytes of virtual address space (cuMemAddressReserve).
// hint is an address the driver may ignore; alignment 0 means the granularity.
//cu cuMemAddressFree(ptr DevicePtr, size uint64) v10020
//cu:export MemAddressFree "%v, %d" ptr size
// MemAddressFree frees a reservation (cuMemAddressFree).
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
//cu:export MemGetAllocationPropertiesFromHandle "%v" handle
// MemGetAllocationPropertiesFromHandle returns the properties handle was created with.
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
//cu:export MulticastAddDevice "%v, device %d" mc dev
// MulticastAddDevice adds a device to a multicast object (cuMulticastAddDevice).
//cu cuMulticastBindMem(mc MemHandle, mcOffset uint64, mem MemHandle, memOffset uint64, size uint64, flags uint64) v12010
//cu:export MulticastBindMem "%v+%d, %v+%d, %d, flags %d" mc mcOffset mem memOffset size flags
// MulticastBindMem binds size bytes of mem, from memOffset, to mc at mcOffset.
//cu cuMulticastBindAddr(mc MemHandle, mcOffset uint64, ptr DevicePtr, size uint64, flags uint64) v12010
//cu:export MulticastBindAddr "%v+%d, %v, %d, flags %d" mc mcOffset ptr size flags
// MulticastBindAddr binds the memory mapped at ptr to mc at mcOffset.
//cu cuMulticastUnbind(mc MemHandle, dev Device, mcOffset uint64, size uint64) v12010
//cu:export MulticastUnbind "%v, device %d, %d, %d" mc dev mcOffset size
// MulticastUnbind unbinds dev's memory from mc at [mcOffset, mcOffset+size).
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
//cu:export MulticastBindMemV2 "%v+%d, device %d, %v+%d, %d, flags %d" mc mcOffset dev mem memOffset size flags
// MulticastBindMemV2 binds size bytes of mem, from memOffset, to mc at mcOffset for device
// dev (cuMulticastBindMem_v2, CUDA 13.1). On a driver without the call it fails, before
// looking at the handles, with an error matching ERROR_NOT_SUPPORTED and
// loader.ErrNotSupported.
//cu cuMulticastBindAddr_v2(mc MemHandle, dev Device, mcOffset uint64, ptr DevicePtr, size uint64, flags uint64) v13010 optional
//cu:decl CUresult CUDAAPI cuMulticastBindAddr_v2(CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset, CUdeviceptr memptr, size_t size, unsigned long long flags);
//cu:export MulticastBindAddrV2 "%v+%d, device %d, %v, %d, flags %d" mc mcOffset dev ptr size flags
// MulticastBindAddrV2 binds the memory mapped at ptr to mc at mcOffset for device dev
// (cuMulticastBindAddr_v2, CUDA 13.1). On a driver without the call it fails, before
// looking at the handle, with an error matching ERROR_NOT_SUPPORTED and
// loader.ErrNotSupported.

// Checkpoint and restore of a whole CUDA process (checkpoint.go), CUDA 12.8+: a driver
// without them fails these calls with loader.ErrNotSupported.
//cu cuCheckpointProcessGetRestoreThreadId(pid int32, out tid int32) v12080
//cu cuCheckpointProcessGetState(pid int32, out state ProcessState) v12080
//cu cuCheckpointProcessLock(pid int32, args *checkpointLockArgs) v12080
//cu cuCheckpointProcessCheckpoint(pid int32, args *checkpointArgs) v12080
//cu cuCheckpointProcessRestore(pid int32, args *checkpointRestoreArgs) v12080
//cu cuCheckpointProcessUnlock(pid int32, args *checkpointArgs) v12080

// Modules and kernel launch (module.go). cuLaunchKernel's eleven parameters go through
// purego.SyscallN; its pointers are to pinned heap memory the caller keeps alive.
//cu cuModuleLoadData(out module uintptr, image unsafe.Pointer) v2000
//cu cuModuleGetFunction(out fn uintptr, module uintptr, name unsafe.Pointer) v2000
//cu cuModuleUnload(module uintptr) v2000
//cu cuLaunchKernel(fn uintptr, gridX uint32, gridY uint32, gridZ uint32, blockX uint32, blockY uint32, blockZ uint32, sharedMem uint32, stream uintptr, params uintptr, extra uintptr) v4000
