package cu

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a CUdeviceptr: an address in the unified virtual address space.
type DevicePtr uint64

func (p DevicePtr) String() string { return fmt.Sprintf("%#x", uint64(p)) }

// The copies and memsets below return only once the data is in place on the device, visible
// to every context. The driver's own calls do not promise that: cuMemcpyHtoD from pageable
// memory may return once the data is staged, and cuMemcpyDtoD and cuMemset* may return
// before they run. Within one context the legacy default stream orders them, but a read from
// another device's context does not wait for them: on two H200s, a write from device 0 read
// back from device 1 showed stale bytes. So each one ends with cuCtxSynchronize.

// CopyHtoD copies src to device memory at dst (cuMemcpyHtoD_v2).
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return wrap(invalidArg("empty host buffer"), "cuMemcpyHtoD", "%v, %d bytes", dst, len(src))
	}
	return c.Do(func() error {
		if err := cuMemcpyHtoD(dst, unsafe.Pointer(&src[0]), uint64(len(src))); err != nil {
			return wrap(err, "cuMemcpyHtoD", "%v, %d bytes", dst, len(src))
		}
		if err := cuCtxSynchronize(); err != nil {
			return wrap(err, "cuMemcpyHtoD", "%v, %d bytes (synchronize)", dst, len(src))
		}
		return nil
	})
}

// CopyDtoH copies len(dst) bytes of device memory at src into dst (cuMemcpyDtoH_v2).
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return wrap(invalidArg("empty host buffer"), "cuMemcpyDtoH", "%v, %d bytes", src, len(dst))
	}
	return c.Do(func() error {
		if err := cuMemcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst))); err != nil {
			return wrap(err, "cuMemcpyDtoH", "%v, %d bytes", src, len(dst))
		}
		return nil
	})
}

// CopyDtoD copies size bytes from src to dst, both device addresses (cuMemcpyDtoD_v2).
func (c *Context) CopyDtoD(dst, src DevicePtr, size uint64) error {
	if size == 0 {
		return wrap(invalidArg("zero size"), "cuMemcpyDtoD", "%v <- %v, 0 bytes", dst, src)
	}
	return c.Do(func() error {
		if err := cuMemcpyDtoD(dst, src, size); err != nil {
			return wrap(err, "cuMemcpyDtoD", "%v <- %v, %d bytes", dst, src, size)
		}
		if err := cuCtxSynchronize(); err != nil {
			return wrap(err, "cuMemcpyDtoD", "%v <- %v, %d bytes (synchronize)", dst, src, size)
		}
		return nil
	})
}

// MemsetD8 sets n bytes at dst to v (cuMemsetD8_v2).
func (c *Context) MemsetD8(dst DevicePtr, v uint8, n uint64) error {
	return memset(c, cuMemsetD8, "cuMemsetD8", dst, v, n)
}

// MemsetD32 sets n 32-bit words at dst (4-byte aligned) to v (cuMemsetD32_v2).
func (c *Context) MemsetD32(dst DevicePtr, v uint32, n uint64) error {
	return memset(c, cuMemsetD32, "cuMemsetD32", dst, v, n)
}

func memset[T uint8 | uint32](c *Context, set func(DevicePtr, T, uint64) error, op string, dst DevicePtr, v T, n uint64) error {
	if n == 0 {
		return wrap(invalidArg("zero count"), op, "%v, %#x, 0", dst, v)
	}
	return c.Do(func() error {
		if err := set(dst, v, n); err != nil {
			return wrap(err, op, "%v, %#x, %d", dst, v, n)
		}
		if err := cuCtxSynchronize(); err != nil {
			return wrap(err, op, "%v, %#x, %d (synchronize)", dst, v, n)
		}
		return nil
	})
}

// MemGetInfo returns the free and total memory of the context's device (cuMemGetInfo_v2).
func (c *Context) MemGetInfo() (free, total uint64, err error) {
	err = c.Do(func() error {
		var err error
		if free, total, err = cuMemGetInfo(); err != nil {
			return wrap(err, "cuMemGetInfo", "device %d", c.dev)
		}
		return nil
	})
	return free, total, err
}

// MemAlloc allocates size bytes of ordinary device memory (cuMemAlloc_v2): the classic
// allocator, here for baselines and comparisons with VMM. Free it with MemFree.
func (c *Context) MemAlloc(size uint64) (DevicePtr, error) {
	if size == 0 {
		return 0, wrap(invalidArg("zero size"), "cuMemAlloc", "0")
	}
	var p DevicePtr
	err := c.Do(func() error {
		var err error
		if p, err = cuMemAlloc(size); err != nil {
			return wrap(err, "cuMemAlloc", "%d", size)
		}
		return nil
	})
	return p, err
}

// MemFree frees memory from MemAlloc (cuMemFree_v2).
func (c *Context) MemFree(p DevicePtr) error {
	return c.Do(func() error {
		if err := cuMemFree(p); err != nil {
			return wrap(err, "cuMemFree", "%v", p)
		}
		return nil
	})
}

// MemGetAddressRange returns the base and size of the allocation or mapping containing p
// (cuMemGetAddressRange_v2). Unlike the VMM calls it needs a current context: without one
// the driver returns CUDA_ERROR_INVALID_CONTEXT.
func (c *Context) MemGetAddressRange(p DevicePtr) (base DevicePtr, size uint64, err error) {
	err = c.Do(func() error {
		var err error
		if base, size, err = cuMemGetAddressRange(p); err != nil {
			return wrap(err, "cuMemGetAddressRange", "%v", p)
		}
		return nil
	})
	return base, size, err
}
