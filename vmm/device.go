package vmm

import (
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
	if !m.usable() {
		return 0, opErr(errNoBackend, "driver version", "")
	}
	v, err := m.b.DriverVersion()
	return v, opErr(err, "driver version", "")
}

// DeviceCount is the number of devices.
func (m *Manager) DeviceCount() (int, error) {
	if !m.usable() {
		return 0, opErr(errNoBackend, "device count", "")
	}
	n, err := m.b.DeviceCount()
	return n, opErr(err, "device count", "")
}

// Device describes device ordinal dev.
func (m *Manager) Device(dev int) (DeviceInfo, error) {
	if !m.usable() {
		return DeviceInfo{}, opErr(errNoBackend, "device", "%d", dev)
	}
	d, err := m.b.Device(dev)
	return d, opErr(err, "device", "%d", dev)
}

// Attribute is one attribute of device ordinal dev.
func (m *Manager) Attribute(dev int, a cu.DeviceAttribute) (int, error) {
	if !m.usable() {
		return 0, opErr(errNoBackend, "attribute", "%v of device %d", a, dev)
	}
	v, err := m.b.Attribute(dev, a)
	return v, opErr(err, "attribute", "%v of device %d", a, dev)
}

// CanAccessPeer reports whether device dev can access memory of device peer.
func (m *Manager) CanAccessPeer(dev, peer int) (bool, error) {
	if !m.usable() {
		return false, opErr(errNoBackend, "can access peer", "device %d peer %d", dev, peer)
	}
	ok, err := m.b.CanAccessPeer(dev, peer)
	return ok, opErr(err, "can access peer", "device %d peer %d", dev, peer)
}

// WriteAt writes p at device address addr, from device dev's context.
func (m *Manager) WriteAt(dev int, p []byte, addr cu.DevicePtr) error {
	if !m.usable() {
		return opErr(errNoBackend, "write", "%s device %d", rangeArgs(addr, uint64(len(p))), dev)
	}
	if err := m.b.CopyHtoD(dev, addr, p); err != nil {
		return opErr(err, "write", "%s device %d", rangeArgs(addr, uint64(len(p))), dev)
	}
	return nil
}

// ReadAt reads len(p) bytes at device address addr into p, from device dev's context.
func (m *Manager) ReadAt(dev int, p []byte, addr cu.DevicePtr) error {
	if !m.usable() {
		return opErr(errNoBackend, "read", "%s device %d", rangeArgs(addr, uint64(len(p))), dev)
	}
	if err := m.b.CopyDtoH(dev, p, addr); err != nil {
		return opErr(err, "read", "%s device %d", rangeArgs(addr, uint64(len(p))), dev)
	}
	return nil
}

// Copy copies n bytes from device address src to dst, from device dev's context.
func (m *Manager) Copy(dev int, dst, src cu.DevicePtr, n uint64) error {
	if !m.usable() {
		return opErr(errNoBackend, "copy", "%v to %v %s device %d", src, dst, units.Size(n), dev)
	}
	if err := m.b.CopyDtoD(dev, dst, src, n); err != nil {
		return opErr(err, "copy", "%v to %v %s device %d", src, dst, units.Size(n), dev)
	}
	return nil
}

// Fill sets n bytes at device address dst to v, from device dev's context.
func (m *Manager) Fill(dev int, dst cu.DevicePtr, v byte, n uint64) error {
	if !m.usable() {
		return opErr(errNoBackend, "fill", "%s with %#x device %d", rangeArgs(dst, n), v, dev)
	}
	if err := m.b.MemsetD8(dev, dst, v, n); err != nil {
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
