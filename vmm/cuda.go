package vmm

import (
	"sync"

	"github.com/cuvmm/cuvmm/cu"
)

// cudaBackend is the real driver, through package cu (which keeps unknown handle values
// away from the driver). Most of its methods only pass their arguments on to cu: those are
// generated from the //cu:backend lines of cu/prototypes.go (zcuda.go).
type cudaBackend struct {
	devs sync.Map // ordinal -> cu.Device
}

// CUDA returns the real driver as a Backend, the same one on every call: the process has
// one driver, and the allocations of one Manager over it may be mapped through another's
// reservations. It loads and initializes the driver; the error matches loader.ErrNoDriver
// when there is none.
func CUDA() (Backend, error) {
	if err := cu.Init(); err != nil {
		return nil, err
	}
	return theDriver, nil
}

var theDriver = &cudaBackend{}

func (*cudaBackend) Name() string { return "cuda" }

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

// AddressRange asks from device 0's primary context: the call needs a context, and with
// unified addressing any device's will do.
func (b *cudaBackend) AddressRange(ptr cu.DevicePtr) (cu.DevicePtr, uint64, error) {
	c, err := b.ctx(0)
	if err != nil {
		return 0, 0, err
	}
	return c.MemGetAddressRange(ptr)
}

// LiveHandles counts the allocation and multicast handles the process holds (see
// cu.LiveHandles); the conformance suite uses it to prove it leaks none.
func (*cudaBackend) LiveHandles() int {
	n, _ := cu.LiveHandles()
	return n
}

// MemInfo is cuMemGetInfo in device ordinal's primary context.
func (b *cudaBackend) MemInfo(ordinal int) (free, total uint64, err error) {
	c, err := b.ctx(ordinal)
	if err != nil {
		return 0, 0, err
	}
	return c.MemGetInfo()
}

// ExportDmaBuf asks from device 0's primary context, as AddressRange does: whether the call
// needs a current context is not recorded (cu's TestGPUDmaBufFD logs it), and with unified
// addressing any device's context names the same addresses.
func (b *cudaBackend) ExportDmaBuf(ptr cu.DevicePtr, size, flags uint64) (int, error) {
	c, err := b.ctx(0)
	if err != nil {
		return -1, err
	}
	fd := -1
	err = c.Do(func() (err error) {
		fd, err = cu.MemGetDmaBufFD(ptr, size, flags)
		return err
	})
	return fd, err
}
