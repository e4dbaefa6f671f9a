package cu

import (
	"unsafe"
)

// The virtual memory management calls. None needs a current context.

// MemGetAllocationGranularity returns the minimum or recommended granularity of allocations
// with prop (cuMemGetAllocationGranularity).
func MemGetAllocationGranularity(prop *MemAllocationProp, option MemAllocationGranularityFlags) (uint64, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if prop == nil {
		return 0, wrap(invalidArg("nil properties"), "cuMemGetAllocationGranularity", "nil, %d", option)
	}
	o := getOut()
	defer putOut(o)
	o.u64[0], o.prop = 0, *prop
	if err := call(procMemGetAllocationGranularity, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(unsafe.Pointer(&o.prop)), uintptr(option)); err != nil {
		return 0, wrap(err, "cuMemGetAllocationGranularity", "%+v, %d", *prop, option)
	}
	return o.u64[0], nil
}

// MemCreate allocates size bytes of physical memory described by prop (cuMemCreate).
func MemCreate(size uint64, prop *MemAllocationProp, flags uint64) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if prop == nil {
		return 0, wrap(invalidArg("nil properties"), "cuMemCreate", "%d, nil, %d", size, flags)
	}
	o := getOut()
	defer putOut(o)
	o.u64[0], o.prop = 0, *prop
	if err := call(procMemCreate, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(size), uintptr(unsafe.Pointer(&o.prop)), uintptr(flags)); err != nil {
		return 0, wrap(err, "cuMemCreate", "%d, %+v, %d", size, *prop, flags)
	}
	h := MemHandle(o.u64[0])
	handles.add(h, kindMemory)
	return h, nil
}

// MemRelease drops one reference to h (cuMemRelease). The memory is freed once every
// reference is released and every mapping of it unmapped.
func MemRelease(h MemHandle) error {
	err := handles.release(h, func() error { return call(procMemRelease, uintptr(h)) })
	if err != nil {
		return wrap(err, "cuMemRelease", "%v", h)
	}
	return nil
}

// MemRetainAllocationHandle returns the handle of the memory mapped at addr and takes a
// reference to it (cuMemRetainAllocationHandle); release it with MemRelease.
func MemRetainAllocationHandle(addr DevicePtr) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	o := getOut()
	defer putOut(o)
	o.u64[0] = 0
	// The driver takes the address as void*, but only as a number: it is a device address.
	if err := call(procMemRetainAllocationHandle, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(addr)); err != nil {
		return 0, wrap(err, "cuMemRetainAllocationHandle", "%v", addr)
	}
	h := MemHandle(o.u64[0])
	handles.add(h, kindMemory)
	return h, nil
}

// MemGetAllocationPropertiesFromHandle returns the properties h was created with.
func MemGetAllocationPropertiesFromHandle(h MemHandle) (MemAllocationProp, error) {
	if err := handles.acquire(h); err != nil {
		return MemAllocationProp{}, wrap(err, "cuMemGetAllocationPropertiesFromHandle", "%v", h)
	}
	defer handles.done()
	o := getOut()
	defer putOut(o)
	o.prop = MemAllocationProp{}
	if err := call(procMemGetAllocationPropertiesFromHandle, uintptr(unsafe.Pointer(&o.prop)), uintptr(h)); err != nil {
		return MemAllocationProp{}, wrap(err, "cuMemGetAllocationPropertiesFromHandle", "%v", h)
	}
	return o.prop, nil
}

// MemAddressReserve reserves size bytes of virtual address space (cuMemAddressReserve).
// addr is a hint the driver may ignore; alignment 0 means the granularity.
func MemAddressReserve(size, alignment uint64, addr DevicePtr, flags uint64) (DevicePtr, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	o := getOut()
	defer putOut(o)
	o.u64[0] = 0
	if err := call(procMemAddressReserve, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(size), uintptr(alignment), uintptr(addr), uintptr(flags)); err != nil {
		return 0, wrap(err, "cuMemAddressReserve", "size %d, alignment %d, hint %v, flags %d", size, alignment, addr, flags)
	}
	return DevicePtr(o.u64[0]), nil
}

// MemAddressFree frees a reservation (cuMemAddressFree).
func MemAddressFree(ptr DevicePtr, size uint64) error {
	if err := Init(); err != nil {
		return err
	}
	if err := call(procMemAddressFree, uintptr(ptr), uintptr(size)); err != nil {
		return wrap(err, "cuMemAddressFree", "%v, %d", ptr, size)
	}
	return nil
}

// MemMap maps size bytes of h, from offset, at ptr (cuMemMap).
func MemMap(ptr DevicePtr, size, offset uint64, h MemHandle, flags uint64) error {
	if err := handles.acquire(h); err != nil {
		return wrap(err, "cuMemMap", "%v, %d, offset %d, %v", ptr, size, offset, h)
	}
	defer handles.done()
	if err := call(procMemMap, uintptr(ptr), uintptr(size), uintptr(offset), uintptr(h), uintptr(flags)); err != nil {
		return wrap(err, "cuMemMap", "%v, %d, offset %d, %v, flags %d", ptr, size, offset, h, flags)
	}
	return nil
}

// MemUnmap unmaps [ptr, ptr+size) (cuMemUnmap).
func MemUnmap(ptr DevicePtr, size uint64) error {
	if err := Init(); err != nil {
		return err
	}
	if err := call(procMemUnmap, uintptr(ptr), uintptr(size)); err != nil {
		return wrap(err, "cuMemUnmap", "%v, %d", ptr, size)
	}
	return nil
}

// MemSetAccess sets the access of several locations to a mapped range in one call
// (cuMemSetAccess).
func MemSetAccess(ptr DevicePtr, size uint64, desc []MemAccessDesc) error {
	if err := Init(); err != nil {
		return err
	}
	if len(desc) == 0 {
		return wrap(invalidArg("no access descriptors"), "cuMemSetAccess", "%v, %d, []", ptr, size)
	}
	if err := callKeep(procMemSetAccess, uintptr(ptr), uintptr(size), uintptr(unsafe.Pointer(&desc[0])), uintptr(len(desc))); err != nil {
		return wrap(err, "cuMemSetAccess", "%v, %d, %+v", ptr, size, desc)
	}
	return nil
}

// MemGetAccess returns the access loc has to the mapping at ptr (cuMemGetAccess).
func MemGetAccess(loc MemLocation, ptr DevicePtr) (MemAccessFlags, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	o := getOut()
	defer putOut(o)
	o.u64[0], o.loc = 0, loc
	if err := call(procMemGetAccess, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(unsafe.Pointer(&o.loc)), uintptr(ptr)); err != nil {
		return 0, wrap(err, "cuMemGetAccess", "%+v, %v", loc, ptr)
	}
	return MemAccessFlags(o.u64[0]), nil
}

// MemExportToFD exports h as a POSIX file descriptor the caller owns
// (cuMemExportToShareableHandle with MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR).
func MemExportToFD(h MemHandle) (int, error) {
	if err := handles.acquire(h); err != nil {
		return -1, wrap(err, "cuMemExportToShareableHandle", "%v, POSIX_FILE_DESCRIPTOR", h)
	}
	defer handles.done()
	o := getOut()
	defer putOut(o)
	o.u64[0] = 0
	if err := call(procMemExportToShareableHandle, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(h), uintptr(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), 0); err != nil {
		return -1, wrap(err, "cuMemExportToShareableHandle", "%v, POSIX_FILE_DESCRIPTOR", h)
	}
	return int(int32(uint32(o.u64[0]))), nil
}

// MemExportToFabric exports h as a fabric handle (MEM_HANDLE_TYPE_FABRIC).
func MemExportToFabric(h MemHandle) (MemFabricHandle, error) {
	if err := handles.acquire(h); err != nil {
		return MemFabricHandle{}, wrap(err, "cuMemExportToShareableHandle", "%v, FABRIC", h)
	}
	defer handles.done()
	fh := new(MemFabricHandle)
	if err := callKeep(procMemExportToShareableHandle, uintptr(unsafe.Pointer(fh)), uintptr(h), uintptr(MEM_HANDLE_TYPE_FABRIC), 0); err != nil {
		return MemFabricHandle{}, wrap(err, "cuMemExportToShareableHandle", "%v, FABRIC", h)
	}
	return *fh, nil
}

// MemExportToWin32 exports h as a Windows NT handle (MEM_HANDLE_TYPE_WIN32) or KMT handle
// (MEM_HANDLE_TYPE_WIN32_KMT).
func MemExportToWin32(h MemHandle, t MemHandleType) (uintptr, error) {
	if t != MEM_HANDLE_TYPE_WIN32 && t != MEM_HANDLE_TYPE_WIN32_KMT {
		return 0, wrap(invalidArg("not a Win32 handle type"), "cuMemExportToShareableHandle", "%v, %d", h, t)
	}
	if err := handles.acquire(h); err != nil {
		return 0, wrap(err, "cuMemExportToShareableHandle", "%v, %d", h, t)
	}
	defer handles.done()
	o := getOut()
	defer putOut(o)
	o.u64[0] = 0
	if err := call(procMemExportToShareableHandle, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(h), uintptr(t), 0); err != nil {
		return 0, wrap(err, "cuMemExportToShareableHandle", "%v, %d", h, t)
	}
	return uintptr(o.u64[0]), nil
}

// MemImportFromFD imports an allocation from a POSIX file descriptor
// (cuMemImportFromShareableHandle). The descriptor stays the caller's to close.
func MemImportFromFD(fd int) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if fd < 0 {
		return 0, wrap(invalidArg("negative file descriptor"), "cuMemImportFromShareableHandle", "fd %d", fd)
	}
	o := getOut()
	defer putOut(o)
	o.u64[0] = 0
	// For POSIX descriptors the driver takes the descriptor's value cast to void*.
	if err := call(procMemImportFromShareableHandle, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(fd), uintptr(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)); err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "fd %d", fd)
	}
	h := MemHandle(o.u64[0])
	handles.add(h, kindMemory)
	return h, nil
}

// MemImportFromFabric imports an allocation from a fabric handle.
func MemImportFromFabric(fh MemFabricHandle) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	o := getOut()
	defer putOut(o)
	o.u64[0] = 0
	p := new(MemFabricHandle)
	*p = fh
	if err := callKeep(procMemImportFromShareableHandle, uintptr(unsafe.Pointer(&o.u64[0])), uintptr(unsafe.Pointer(p)), uintptr(MEM_HANDLE_TYPE_FABRIC)); err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "FABRIC")
	}
	h := MemHandle(o.u64[0])
	handles.add(h, kindMemory)
	return h, nil
}

// MemImportFromWin32 imports an allocation from a Windows handle of type t.
func MemImportFromWin32(handle uintptr, t MemHandleType) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if t != MEM_HANDLE_TYPE_WIN32 && t != MEM_HANDLE_TYPE_WIN32_KMT {
		return 0, wrap(invalidArg("not a Win32 handle type"), "cuMemImportFromShareableHandle", "%#x, %d", handle, t)
	}
	o := getOut()
	defer putOut(o)
	o.u64[0] = 0
	if err := call(procMemImportFromShareableHandle, uintptr(unsafe.Pointer(&o.u64[0])), handle, uintptr(t)); err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "%#x, %d", handle, t)
	}
	h := MemHandle(o.u64[0])
	handles.add(h, kindMemory)
	return h, nil
}
