package cu

import "errors"

// The virtual memory management calls. None needs a current context. Each wraps the
// generated function of its prototype (zcalls.go), which pins handle arguments and lays out
// the frame; what is here is the handle table's bookkeeping, the checks made before the
// driver is called and the naming of errors. The wrappers with nothing to add but the
// naming of errors are generated too (zwrappers.go): reserve, free and the properties.

// MemGetAllocationGranularity returns the minimum or recommended granularity of allocations
// with prop (cuMemGetAllocationGranularity).
func MemGetAllocationGranularity(prop *MemAllocationProp, option MemAllocationGranularityFlags) (uint64, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if prop == nil {
		return 0, wrap(invalidArg("nil properties"), "cuMemGetAllocationGranularity", "nil, %d", option)
	}
	g, err := cuMemGetAllocationGranularity(prop, option)
	if err != nil {
		return 0, wrap(err, "cuMemGetAllocationGranularity", "%+v, %d", *prop, option)
	}
	return g, nil
}

// MemCreate allocates size bytes of physical memory described by prop (cuMemCreate).
func MemCreate(size uint64, prop *MemAllocationProp, flags uint64) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if prop == nil {
		return 0, wrap(invalidArg("nil properties"), "cuMemCreate", "%d, nil, %d", size, flags)
	}
	h, err := cuMemCreate(size, prop, flags)
	if err != nil {
		return 0, wrap(err, "cuMemCreate", "%d, %+v, %d", size, *prop, flags)
	}
	return h, nil
}

// record returns the MemHandle of a value the driver just returned (create, import,
// retain). If the handle table cannot take it, the driver's reference is released again:
// a value cu does not record could never be released. (The generated functions of calls
// with an out MemHandle end with it.)
func record(drv uint64, op string) (MemHandle, error) {
	h, err := handles.add(drv)
	if err != nil {
		_ = cuMemRelease(drv)
		return 0, wrap(err, op, "")
	}
	return h, nil
}

// MemRelease drops one reference to h (cuMemRelease). The memory is freed once every
// reference is released and every mapping of it unmapped.
func MemRelease(h MemHandle) error {
	if err := handles.release(h, cuMemRelease); err != nil {
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
		return cuMemRetainAllocationHandle(addr)
	})
	if errors.Is(err, errTooManyHandles) {
		_ = cuMemRelease(drv)
	}
	if err != nil {
		return 0, wrap(err, "cuMemRetainAllocationHandle", "%v", addr)
	}
	return h, nil
}

// MemMap maps size bytes of h, from offset, at ptr (cuMemMap).
func MemMap(ptr DevicePtr, size, offset uint64, h MemHandle, flags uint64) error {
	s, drv, err := handles.pin(h)
	if err == nil {
		if err = cuMemMap(ptr, size, offset, drv, flags); err == nil {
			handles.mapped(s, h, uint64(ptr), size)
			return nil
		}
		s.unpin()
	}
	return wrap(err, "cuMemMap", "%v, %d, offset %d, %v, flags %d", ptr, size, offset, h, flags)
}

// MemUnmap unmaps [ptr, ptr+size) (cuMemUnmap).
func MemUnmap(ptr DevicePtr, size uint64) error {
	if err := Init(); err != nil {
		return err
	}
	if err := handles.unmap(uint64(ptr), size, func() error { return cuMemUnmap(ptr, size) }); err != nil {
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
	if err := cuMemSetAccess(ptr, size, desc); err != nil {
		return wrap(err, "cuMemSetAccess", "%v, %d, %+v", ptr, size, desc)
	}
	return nil
}

// MemGetAccess returns the access loc has to the mapping at ptr (cuMemGetAccess).
func MemGetAccess(loc MemLocation, ptr DevicePtr) (MemAccessFlags, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	flags, err := cuMemGetAccess(&loc, ptr)
	if err != nil {
		return 0, wrap(err, "cuMemGetAccess", "%+v, %v", loc, ptr)
	}
	return MemAccessFlags(flags), nil
}

// MemExportToFD exports h as a POSIX file descriptor the caller owns
// (cuMemExportToShareableHandle with MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR).
func MemExportToFD(h MemHandle) (int, error) {
	fd, err := memExportToFD(h, MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
	if err != nil {
		return -1, wrap(err, "cuMemExportToShareableHandle", "%v, POSIX_FILE_DESCRIPTOR", h)
	}
	return int(fd), nil
}

// MemExportToFabric exports h as a fabric handle (MEM_HANDLE_TYPE_FABRIC).
func MemExportToFabric(h MemHandle) (MemFabricHandle, error) {
	fh, err := memExportToFabric(h, MEM_HANDLE_TYPE_FABRIC, 0)
	if err != nil {
		return MemFabricHandle{}, wrap(err, "cuMemExportToShareableHandle", "%v, FABRIC", h)
	}
	return fh, nil
}

// MemExportToWin32 exports h as a Windows NT handle (MEM_HANDLE_TYPE_WIN32) or KMT handle
// (MEM_HANDLE_TYPE_WIN32_KMT).
func MemExportToWin32(h MemHandle, t MemHandleType) (uintptr, error) {
	if t != MEM_HANDLE_TYPE_WIN32 && t != MEM_HANDLE_TYPE_WIN32_KMT {
		return 0, wrap(invalidArg("not a Win32 handle type"), "cuMemExportToShareableHandle", "%v, %d", h, t)
	}
	v, err := memExportToWin32(h, t, 0)
	if err != nil {
		return 0, wrap(err, "cuMemExportToShareableHandle", "%v, %d", h, t)
	}
	return v, nil
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
	// For POSIX descriptors the driver takes the descriptor's value cast to void*.
	h, err := memImportFromValue(uintptr(fd), MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	if err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "fd %d", fd)
	}
	return h, nil
}

// MemImportFromFabric imports an allocation from a fabric handle.
func MemImportFromFabric(fh MemFabricHandle) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	// The 64-byte fabric handle and the out-parameter do not fit a frame together: the call
	// keeps a heap copy alive.
	h, err := memImportFromFabric(&fh, MEM_HANDLE_TYPE_FABRIC)
	if err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "FABRIC")
	}
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
	h, err := memImportFromValue(handle, t)
	if err != nil {
		return 0, wrap(err, "cuMemImportFromShareableHandle", "%#x, %d", handle, t)
	}
	return h, nil
}

// MemGetDmaBufFD returns a dma-buf file descriptor, which the caller owns, for the device
// memory [ptr, ptr+size) (cuMemGetHandleForAddressRange with
// MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD). ptr and size must be multiples of the host page size;
// a range from MemAddressReserve must be mapped whole, by allocations of one device with the
// same properties. flags is 0 or MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE. The device says
// whether it can with DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED.
func MemGetDmaBufFD(ptr DevicePtr, size uint64, flags uint64) (int, error) {
	if err := Init(); err != nil {
		return -1, err
	}
	fd, err := cuMemGetHandleForAddressRange(ptr, size, MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, flags)
	if err != nil {
		return -1, wrap(err, "cuMemGetHandleForAddressRange", "%v, %d, DMA_BUF_FD, flags %d", ptr, size, flags)
	}
	return int(fd), nil
}
