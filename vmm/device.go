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

// CopyIn writes src at device address dst, from device dev's context.
func (m *Manager) CopyIn(dev int, dst cu.DevicePtr, src []byte) error {
	if !m.usable() {
		return opErr(errNoBackend, "copy in", "%s device %d", rangeArgs(dst, uint64(len(src))), dev)
	}
	if err := m.b.CopyHtoD(dev, dst, src); err != nil {
		return opErr(err, "copy in", "%s device %d", rangeArgs(dst, uint64(len(src))), dev)
	}
	return nil
}

// CopyOut reads len(dst) bytes at device address src, from device dev's context.
func (m *Manager) CopyOut(dev int, dst []byte, src cu.DevicePtr) error {
	if !m.usable() {
		return opErr(errNoBackend, "copy out", "%s device %d", rangeArgs(src, uint64(len(dst))), dev)
	}
	if err := m.b.CopyDtoH(dev, dst, src); err != nil {
		return opErr(err, "copy out", "%s device %d", rangeArgs(src, uint64(len(dst))), dev)
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
