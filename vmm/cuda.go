package vmm

import (
	"sync"

	"github.com/cuvmm/cuvmm/cu"
)

// cudaBackend is the real driver, through package cu (which keeps unknown handle values
// away from the driver).
type cudaBackend struct {
	devs sync.Map // ordinal -> cu.Device
}

// CUDA returns the real driver as a Backend. It loads and initializes the driver; the
// error matches loader.ErrNoDriver when there is none.
func CUDA() (Backend, error) {
	if err := cu.Init(); err != nil {
		return nil, err
	}
	return &cudaBackend{}, nil
}

func (*cudaBackend) Name() string { return "cuda" }

func (*cudaBackend) DriverVersion() (int, error) { return cu.DriverVersion() }

func (*cudaBackend) DeviceCount() (int, error) { return cu.DeviceCount() }

func (b *cudaBackend) dev(ordinal int) (cu.Device, error) {
	if d, ok := b.devs.Load(ordinal); ok {
		return d.(cu.Device), nil
	}
	d, err := cu.DeviceGet(ordinal)
	if err != nil {
		return 0, err
	}
	b.devs.Store(ordinal, d)
	return d, nil
}

func (b *cudaBackend) ctx(ordinal int) (*cu.Context, error) {
	d, err := b.dev(ordinal)
	if err != nil {
		return nil, err
	}
	return d.Primary()
}

func (b *cudaBackend) Device(ordinal int) (DeviceInfo, error) {
	d, err := b.dev(ordinal)
	if err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Ordinal: ordinal}
	if info.Name, err = d.Name(); err != nil {
		return DeviceInfo{}, err
	}
	if info.UUID, err = d.UUID(); err != nil {
		return DeviceInfo{}, err
	}
	if info.PCIBusID, err = d.PCIBusID(); err != nil {
		return DeviceInfo{}, err
	}
	if info.TotalMem, err = d.TotalMem(); err != nil {
		return DeviceInfo{}, err
	}
	if info.ComputeMajor, info.ComputeMinor, err = d.ComputeCapability(); err != nil {
		return DeviceInfo{}, err
	}
	return info, nil
}

func (b *cudaBackend) Attribute(ordinal int, a cu.DeviceAttribute) (int, error) {
	d, err := b.dev(ordinal)
	if err != nil {
		return 0, err
	}
	return d.Attribute(a)
}

func (b *cudaBackend) CanAccessPeer(ordinal, peer int) (bool, error) {
	d, err := b.dev(ordinal)
	if err != nil {
		return false, err
	}
	p, err := b.dev(peer)
	if err != nil {
		return false, err
	}
	return d.CanAccessPeer(p)
}

func (b *cudaBackend) P2PAttribute(a cu.P2PAttribute, src, dst int) (int, error) {
	s, err := b.dev(src)
	if err != nil {
		return 0, err
	}
	d, err := b.dev(dst)
	if err != nil {
		return 0, err
	}
	return s.P2PAttribute(a, d)
}

func (*cudaBackend) Granularity(prop *cu.MemAllocationProp, option cu.MemAllocationGranularityFlags) (uint64, error) {
	return cu.MemGetAllocationGranularity(prop, option)
}

func (*cudaBackend) Create(size uint64, prop *cu.MemAllocationProp, flags uint64) (cu.MemHandle, error) {
	return cu.MemCreate(size, prop, flags)
}

func (*cudaBackend) Release(h cu.MemHandle) error { return cu.MemRelease(h) }

func (*cudaBackend) Retain(addr cu.DevicePtr) (cu.MemHandle, error) {
	return cu.MemRetainAllocationHandle(addr)
}

func (*cudaBackend) Properties(h cu.MemHandle) (cu.MemAllocationProp, error) {
	return cu.MemGetAllocationPropertiesFromHandle(h)
}

func (*cudaBackend) Reserve(size, alignment uint64, hint cu.DevicePtr, flags uint64) (cu.DevicePtr, error) {
	return cu.MemAddressReserve(size, alignment, hint, flags)
}

func (*cudaBackend) Free(ptr cu.DevicePtr, size uint64) error { return cu.MemAddressFree(ptr, size) }

func (*cudaBackend) Map(ptr cu.DevicePtr, size, offset uint64, h cu.MemHandle, flags uint64) error {
	return cu.MemMap(ptr, size, offset, h, flags)
}

func (*cudaBackend) Unmap(ptr cu.DevicePtr, size uint64) error { return cu.MemUnmap(ptr, size) }

func (*cudaBackend) SetAccess(ptr cu.DevicePtr, size uint64, desc []cu.MemAccessDesc) error {
	return cu.MemSetAccess(ptr, size, desc)
}

func (*cudaBackend) GetAccess(loc cu.MemLocation, ptr cu.DevicePtr) (cu.MemAccessFlags, error) {
	return cu.MemGetAccess(loc, ptr)
}

// AddressRange asks from device 0's primary context: the call needs a context, and with
// unified addressing any device's will do.
func (b *cudaBackend) AddressRange(ptr cu.DevicePtr) (cu.DevicePtr, uint64, error) {
	c, err := b.ctx(0)
	if err != nil {
		return 0, 0, err
	}
	return c.MemGetAddressRange(ptr)
}

func (*cudaBackend) ExportFD(h cu.MemHandle) (int, error) { return cu.MemExportToFD(h) }

func (*cudaBackend) ImportFD(fd int) (cu.MemHandle, error) { return cu.MemImportFromFD(fd) }

func (*cudaBackend) ExportFabric(h cu.MemHandle) (cu.MemFabricHandle, error) {
	return cu.MemExportToFabric(h)
}

func (*cudaBackend) ImportFabric(fh cu.MemFabricHandle) (cu.MemHandle, error) {
	return cu.MemImportFromFabric(fh)
}

func (*cudaBackend) ExportWin32(h cu.MemHandle, t cu.MemHandleType) (uintptr, error) {
	return cu.MemExportToWin32(h, t)
}

func (*cudaBackend) ImportWin32(handle uintptr, t cu.MemHandleType) (cu.MemHandle, error) {
	return cu.MemImportFromWin32(handle, t)
}

func (*cudaBackend) MulticastGranularity(prop *cu.MulticastObjectProp, option cu.MulticastGranularityFlags) (uint64, error) {
	return cu.MulticastGetGranularity(prop, option)
}

func (*cudaBackend) MulticastCreate(prop *cu.MulticastObjectProp) (cu.MemHandle, error) {
	return cu.MulticastCreate(prop)
}

func (b *cudaBackend) MulticastAddDevice(mc cu.MemHandle, ordinal int) error {
	d, err := b.dev(ordinal)
	if err != nil {
		return err
	}
	return cu.MulticastAddDevice(mc, d)
}

func (*cudaBackend) MulticastBindMem(mc cu.MemHandle, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error {
	return cu.MulticastBindMem(mc, mcOffset, mem, memOffset, size, flags)
}

func (*cudaBackend) MulticastBindAddr(mc cu.MemHandle, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error {
	return cu.MulticastBindAddr(mc, mcOffset, ptr, size, flags)
}

func (b *cudaBackend) MulticastUnbind(mc cu.MemHandle, ordinal int, mcOffset, size uint64) error {
	d, err := b.dev(ordinal)
	if err != nil {
		return err
	}
	return cu.MulticastUnbind(mc, d, mcOffset, size)
}

func (b *cudaBackend) CopyHtoD(ordinal int, dst cu.DevicePtr, src []byte) error {
	c, err := b.ctx(ordinal)
	if err != nil {
		return err
	}
	return c.CopyHtoD(dst, src)
}

func (b *cudaBackend) CopyDtoH(ordinal int, dst []byte, src cu.DevicePtr) error {
	c, err := b.ctx(ordinal)
	if err != nil {
		return err
	}
	return c.CopyDtoH(dst, src)
}

func (b *cudaBackend) CopyDtoD(ordinal int, dst, src cu.DevicePtr, size uint64) error {
	c, err := b.ctx(ordinal)
	if err != nil {
		return err
	}
	return c.CopyDtoD(dst, src, size)
}

func (b *cudaBackend) MemsetD8(ordinal int, dst cu.DevicePtr, v uint8, n uint64) error {
	c, err := b.ctx(ordinal)
	if err != nil {
		return err
	}
	return c.MemsetD8(dst, v, n)
}

// LiveHandles counts the allocation and multicast handles the process holds (see
// cu.LiveHandles); the conformance suite uses it to prove it leaks none.
func (*cudaBackend) LiveHandles() int {
	n, _ := cu.LiveHandles()
	return n
}
