package vmm

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/units"
)

// Name is the backend's name: "cuda" for the real driver, "sim" for the simulator.
func (m *Manager) Name() string {
	if !m.usable() {
		return ""
	}
	return m.b.Name()
}

// DriverVersion is the CUDA version the driver supports (13000 for 13.0).
func (m *Manager) DriverVersion() (int, error) {
	v, err := call(m, Backend.DriverVersion)
	return v, opErr(err, "driver version", "")
}

// DeviceCount is the number of devices.
func (m *Manager) DeviceCount() (int, error) {
	n, err := call(m, Backend.DeviceCount)
	return n, opErr(err, "device count", "")
}

// Device describes device ordinal dev.
func (m *Manager) Device(dev int) (DeviceInfo, error) {
	d, err := call(m, func(b Backend) (DeviceInfo, error) { return b.Device(dev) })
	return d, opErr(err, "device", "%d", dev)
}

// Attribute is one attribute of device ordinal dev.
func (m *Manager) Attribute(dev int, a cu.DeviceAttribute) (int, error) {
	v, err := call(m, func(b Backend) (int, error) { return b.Attribute(dev, a) })
	return v, opErr(err, "attribute", "%v of device %d", a, dev)
}

// CanAccessPeer reports whether device dev can access memory of device peer.
func (m *Manager) CanAccessPeer(dev, peer int) (bool, error) {
	ok, err := call(m, func(b Backend) (bool, error) { return b.CanAccessPeer(dev, peer) })
	return ok, opErr(err, "can access peer", "device %d peer %d", dev, peer)
}

// WriteAt writes p at device address addr, from device dev's context.
func (m *Manager) WriteAt(dev int, p []byte, addr cu.DevicePtr) error {
	if err := m.do(func(b Backend) error { return b.CopyHtoD(dev, addr, p) }); err != nil {
		return opErr(err, "write", "%s device %d", rangeArgs(addr, uint64(len(p))), dev)
	}
	return nil
}

// ReadAt reads len(p) bytes at device address addr into p, from device dev's context.
func (m *Manager) ReadAt(dev int, p []byte, addr cu.DevicePtr) error {
	if err := m.do(func(b Backend) error { return b.CopyDtoH(dev, p, addr) }); err != nil {
		return opErr(err, "read", "%s device %d", rangeArgs(addr, uint64(len(p))), dev)
	}
	return nil
}

// Copy copies n bytes from device address src to dst, from device dev's context.
func (m *Manager) Copy(dev int, dst, src cu.DevicePtr, n uint64) error {
	if err := m.do(func(b Backend) error { return b.CopyDtoD(dev, dst, src, n) }); err != nil {
		return opErr(err, "copy", "%v to %v %s device %d", src, dst, units.Size(n), dev)
	}
	return nil
}

// Fill sets n bytes at device address dst to v, from device dev's context.
func (m *Manager) Fill(dev int, dst cu.DevicePtr, v byte, n uint64) error {
	if err := m.do(func(b Backend) error { return b.MemsetD8(dev, dst, v, n) }); err != nil {
		return opErr(err, "fill", "%s with %#x device %d", rangeArgs(dst, n), v, dev)
	}
	return nil
}

// memInfoer is a Backend that can say how much of a device's memory is free: the real
// driver (cuMemGetInfo, in the device's primary context) and the simulator.
type memInfoer interface {
	MemInfo(ordinal int) (free, total uint64, err error)
}

// MemInfo returns the free and total memory of device dev, or an error matching
// ErrUnsupported for a Backend that cannot tell.
func (m *Manager) MemInfo(dev int) (free, total uint64, err error) {
	if !m.usable() {
		return 0, 0, opErr(errNoBackend, "memory info", "device %d", dev)
	}
	mi, ok := m.b.(memInfoer)
	if !ok {
		return 0, 0, opErr(ErrUnsupported, "memory info", "device %d (backend %s)", dev, m.b.Name())
	}
	free, total, err = mi.MemInfo(dev)
	return free, total, opErr(err, "memory info", "device %d", dev)
}

// features are the properties CheckProps asks about: what Props requests, and the
// attribute in which the device answers whether it can.
var features = []struct {
	name string
	asks func(Props) bool
	attr cu.DeviceAttribute
}{
	{"GPUDirect RDMA with VMM", func(p Props) bool { return p.GPUDirectRDMA }, cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED},
	{"generic compression", func(p Props) bool { return p.Compressible }, cu.DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED},
	{"host memory", func(p Props) bool { return p.Location.Type == cu.MEM_LOCATION_TYPE_HOST }, cu.DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
	{"host NUMA memory", func(p Props) bool {
		return p.Location.Type == cu.MEM_LOCATION_TYPE_HOST_NUMA || p.Location.Type == cu.MEM_LOCATION_TYPE_HOST_NUMA_CURRENT
	}, cu.DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
	{"POSIX file descriptor handles", func(p Props) bool { return p.HandleTypes&cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR != 0 }, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED},
	{"Win32 handles", func(p Props) bool { return p.HandleTypes&cu.MEM_HANDLE_TYPE_WIN32 != 0 }, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED},
	{"Win32 KMT handles", func(p Props) bool { return p.HandleTypes&cu.MEM_HANDLE_TYPE_WIN32_KMT != 0 }, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED},
	{"fabric handles", func(p Props) bool { return p.HandleTypes&cu.MEM_HANDLE_TYPE_FABRIC != 0 }, cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED},
}

// CheckProps asks the device whether it supports what p requests beyond plain memory, and
// fails with an error matching ErrUnsupported, naming the first thing it lacks, where the
// driver would otherwise refuse the create, or silently ignore the request (compression). The
// device asked is p's own for device memory, and dev, the device that will use it, for host
// memory. Plain device memory costs no driver call; each requested feature costs one
// attribute query.
func (m *Manager) CheckProps(p Props, dev int) error {
	if p.Location.Type == cu.MEM_LOCATION_TYPE_DEVICE {
		dev = int(p.Location.ID)
	}
	for _, f := range features {
		if !f.asks(p) {
			continue
		}
		v, err := m.Attribute(dev, f.attr)
		if err != nil {
			return err
		}
		if v == 0 {
			args := p.Location.String()
			if p.Location.Type != cu.MEM_LOCATION_TYPE_DEVICE {
				args += fmt.Sprintf(" used by device %d", dev)
			}
			return &Error{Op: "check props", Args: args, Err: fmt.Errorf("%w: %s (%v is 0)", ErrUnsupported, f.name, f.attr)}
		}
	}
	return nil
}
