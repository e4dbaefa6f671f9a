package cu

import (
	"errors"
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
	var f frame
	*f.prop(1) = *prop
	f.ref(0, 0)
	f.ref(1, 1)
	f.a[2] = uintptr(option)
	if err := f.call(procMemGetAllocationGranularity); err != nil {
		return 0, wrap(err, "cuMemGetAllocationGranularity", "%+v, %d", *prop, option)
	}
	return f.scratch[0], nil
}

// MemCreate allocates size bytes of physical memory described by prop (cuMemCreate).
func MemCreate(size uint64, prop *MemAllocationProp, flags uint64) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if prop == nil {
		return 0, wrap(invalidArg("nil properties"), "cuMemCreate", "%d, nil, %d", size, flags)
	}
	var f frame
	*f.prop(1) = *prop
	f.ref(0, 0)
	f.ref(2, 1)
	f.a[1], f.a[3] = uintptr(size), uintptr(flags)
	if err := f.call(procMemCreate); err != nil {
		return 0, wrap(err, "cuMemCreate", "%d, %+v, %d", size, *prop, flags)
	}
	return record(f.scratch[0], "cuMemCreate")
}

// record returns the MemHandle of a value the driver just returned (create, import,
// retain). If the handle table cannot take it, the driver's reference is released again:
// a value cu does not record could never be released.
func record(drv uint64, op string) (MemHandle, error) {
	h, err := handles.add(drv)
	if err != nil {
		releaseUnrecorded(drv)
		return 0, wrap(err, op, "")
	}
	return h, nil
}

// releaseUnrecorded gives back a reference the handle table could not record.
func releaseUnrecorded(drv uint64) {
	var f frame
	f.a[0] = uintptr(drv)
	_ = f.call(procMemRelease)
}

// MemRelease drops one reference to h (cuMemRelease). The memory is freed once every
// reference is released and every mapping of it unmapped.
func MemRelease(h MemHandle) error {
	err := handles.release(h, func(drv uint64) error {
		var f frame
		f.a[0] = uintptr(drv)
		return f.call(procMemRelease)
	})
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
	h, drv, err := handles.retainAt(uint64(addr), func() (uint64, error) {
		var f frame
		// The driver takes the address as void*, but only as a number: a device address.
		f.ref(0, 0)
		f.a[1] = uintptr(addr)
		err := f.call(procMemRetainAllocationHandle)
		return f.scratch[0], err
	})
	if errors.Is(err, errTooManyHandles) {
		releaseUnrecorded(drv)
	}
	if err != nil {
		return 0, wrap(err, "cuMemRetainAllocationHandle", "%v", addr)
	}
	return h, nil
}

// MemGetAllocationPropertiesFromHandle returns the properties h was created with.
func MemGetAllocationPropertiesFromHandle(h MemHandle) (MemAllocationProp, error) {
	s, drv, err := handles.pin(h)
	if err != nil {
		return MemAllocationProp{}, wrap(err, "cuMemGetAllocationPropertiesFromHandle", "%v", h)
	}
	defer s.unpin()
	var f frame
	f.ref(0, 1)
	f.a[1] = uintptr(drv)
	if err := f.call(procMemGetAllocationPropertiesFromHandle); err != nil {
		return MemAllocationProp{}, wrap(err, "cuMemGetAllocationPropertiesFromHandle", "%v", h)
	}
	return *f.prop(1), nil
}

// MemAddressReserve reserves size bytes of virtual address space (cuMemAddressReserve).
// addr is a hint the driver may ignore; alignment 0 means the granularity.
func MemAddressReserve(size, alignment uint64, addr DevicePtr, flags uint64) (DevicePtr, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var f frame
	f.ref(0, 0)
	f.a[1], f.a[2], f.a[3], f.a[4] = uintptr(size), uintptr(alignment), uintptr(addr), uintptr(flags)
	if err := f.call(procMemAddressReserve); err != nil {
		return 0, wrap(err, "cuMemAddressReserve", "size %d, alignment %d, hint %v, flags %d", size, alignment, addr, flags)
	}
	return DevicePtr(f.scratch[0]), nil
}

// MemAddressFree frees a reservation (cuMemAddressFree).
func MemAddressFree(ptr DevicePtr, size uint64) error {
	if err := Init(); err != nil {
		return err
	}
	var f frame
	f.a[0], f.a[1] = uintptr(ptr), uintptr(size)
	if err := f.call(procMemAddressFree); err != nil {
		return wrap(err, "cuMemAddressFree", "%v, %d", ptr, size)
	}
	return nil
}

// MemMap maps size bytes of h, from offset, at ptr (cuMemMap).
func MemMap(ptr DevicePtr, size, offset uint64, h MemHandle, flags uint64) error {
	s, drv, err := handles.pin(h)
	if err != nil {
		return wrap(err, "cuMemMap", "%v, %d, offset %d, %v", ptr, size, offset, h)
	}
	var f frame
	f.a[0], f.a[1], f.a[2], f.a[3], f.a[4] = uintptr(ptr), uintptr(size), uintptr(offset), uintptr(drv), uintptr(flags)
	if err = f.call(procMemMap); err == nil {
		handles.mapped(s, h, uint64(ptr), size)
	}
	s.unpin()
	if err != nil {
		return wrap(err, "cuMemMap", "%v, %d, offset %d, %v, flags %d", ptr, size, offset, h, flags)
	}
	return nil
}

// MemUnmap unmaps [ptr, ptr+size) (cuMemUnmap).
func MemUnmap(ptr DevicePtr, size uint64) error {
	if err := Init(); err != nil {
		return err
	}
	err := handles.unmap(uint64(ptr), size, func() error {
		var f frame
		f.a[0], f.a[1] = uintptr(ptr), uintptr(size)
		return f.call(procMemUnmap)
	})
	if err != nil {
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
	var err error
	if len(desc) <= maxFrameDescs {
		// The common case (one or a few devices): a copy in the frame, nothing allocated.
		var f frame
		copy(f.descs(len(desc)), desc)
		f.a[0], f.a[1], f.a[3] = uintptr(ptr), uintptr(size), uintptr(len(desc))
		f.ref(2, 0)
		err = f.call(procMemSetAccess)
	} else {
		err = callKeep(procMemSetAccess, uintptr(ptr), uintptr(size), uintptr(unsafe.Pointer(&desc[0])), uintptr(len(desc)))
	}
	if err != nil {
		return wrap(err, "cuMemSetAccess", "%v, %d, %+v", ptr, size, desc)
	}
	return nil
}

// MemGetAccess returns the access loc has to the mapping at ptr (cuMemGetAccess).
func MemGetAccess(loc MemLocation, ptr DevicePtr) (MemAccessFlags, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var f frame
	*f.loc(1) = loc
	f.ref(0, 0)
	f.ref(1, 1)
	f.a[2] = uintptr(ptr)
	if err := f.call(procMemGetAccess); err != nil {
		return 0, wrap(err, "cuMemGetAccess", "%+v, %v", loc, ptr)
	}
	return MemAccessFlags(f.scratch[0]), nil
}

// MemExportToFD exports h as a POSIX file descriptor the caller owns
// (cuMemExportToShareableHandle with MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR).
func MemExportToFD(h MemHandle) (int, error) {
	s, drv, err := handles.pin(h)
	if err != nil {
		return -1, wrap(err, "cuMemExportToShareableHandle", "%v, POSIX_FILE_DESCRIPTOR", h)
	}
	defer s.unpin()
	var f frame
	f.ref(0, 0)
	f.a[1], f.a[2] = uintptr(drv), uintptr(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	if err := f.call(procMemExportToShareableHandle); err != nil {
		return -1, wrap(err, "cuMemExportToShareableHandle", "%v, POSIX_FILE_DESCRIPTOR", h)
	}
	return int(int32(uint32(f.scratch[0]))), nil
}

// MemExportToFabric exports h as a fabric handle (MEM_HANDLE_TYPE_FABRIC).
func MemExportToFabric(h MemHandle) (MemFabricHandle, error) {
	s, drv, err := handles.pin(h)
	if err != nil {
		return MemFabricHandle{}, wrap(err, "cuMemExportToShareableHandle", "%v, FABRIC", h)
	}
	defer s.unpin()
	fh := new(MemFabricHandle)
	if err := callKeep(procMemExportToShareableHandle, uintptr(unsafe.Pointer(fh)), uintptr(drv), uintptr(MEM_HANDLE_TYPE_FABRIC), 0); err != nil {
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
	s, drv, err := handles.pin(h)
	if err != nil {
		return 0, wrap(err, "cuMemExportToShareableHandle", "%v, %d", h, t)
	}
	defer s.unpin()
	var f frame
	f.ref(0, 0)
	f.a[1], f.a[2] = uintptr(drv), uintptr(t)
	if err := f.call(procMemExportToShareableHandle); err != nil {
		return 0, wrap(err, "cuMemExportToShareableHandle", "%v, %d", h, t)
	}
	return uintptr(f.scratch[0]), nil
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
	var f frame
	// For POSIX descriptors the driver takes the descriptor's value cast to void*.
	f.ref(0, 0)
	f.a[1], f.a[2] = uintptr(fd), uintptr(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	if err := f.call(procMemImportFromShareableHandle); err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "fd %d", fd)
	}
	return record(f.scratch[0], "cuMemImportFromShareableHandle")
}

// MemImportFromFabric imports an allocation from a fabric handle.
func MemImportFromFabric(fh MemFabricHandle) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	// The 64-byte fabric handle does not fit a frame: the call keeps a heap copy alive.
	out := new(uint64)
	p := new(MemFabricHandle)
	*p = fh
	if err := callKeep(procMemImportFromShareableHandle, uintptr(unsafe.Pointer(out)), uintptr(unsafe.Pointer(p)), uintptr(MEM_HANDLE_TYPE_FABRIC)); err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "FABRIC")
	}
	return record(*out, "cuMemImportFromShareableHandle")
}

// MemImportFromWin32 imports an allocation from a Windows handle of type t.
func MemImportFromWin32(handle uintptr, t MemHandleType) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if t != MEM_HANDLE_TYPE_WIN32 && t != MEM_HANDLE_TYPE_WIN32_KMT {
		return 0, wrap(invalidArg("not a Win32 handle type"), "cuMemImportFromShareableHandle", "%#x, %d", handle, t)
	}
	var f frame
	f.ref(0, 0)
	f.a[1], f.a[2] = handle, uintptr(t)
	if err := f.call(procMemImportFromShareableHandle); err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "%#x, %d", handle, t)
	}
	return record(f.scratch[0], "cuMemImportFromShareableHandle")
}
