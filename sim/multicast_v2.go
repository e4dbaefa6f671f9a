package sim

import (
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
)

// CUDA 13.1's multicast binds that name the device the binding is for. A Sim has them when
// its Config.DriverVersion is 13010 or more; every preset keeps 13000, the GPU hosts'
// driver, which lacks them. What they add, as NVIDIA's 13.1 reference has it: device memory
// is bound only for the device it was created on (what the 13.0 calls do implicitly), and
// host NUMA memory for a device whose HOST_NUMA_ID is the memory's node (which the 13.0
// calls cannot do). No driver here has them: the results sim returns for what they refuse
// are the reference's, not recorded.

// bindV2Version is the driver version with cuMulticastBindMem_v2 and cuMulticastBindAddr_v2.
const bindV2Version = 13010

// missingSymbol is the error of a call whose symbol the simulated driver lacks, as package cu
// reports one: it matches loader.ErrNotSupported and cu.ERROR_NOT_SUPPORTED.
type missingSymbol struct{ err *loader.SymbolError }

func (e *missingSymbol) Error() string   { return "sim: " + e.err.Error() }
func (e *missingSymbol) Unwrap() []error { return []error{e.err, cu.ERROR_NOT_SUPPORTED} }

// v2 checks the device of a call of one of CUDA 13.1's binds, then fails it on a driver
// older than 13.1 with the error cu returns for a missing symbol, unwrapped.
func (s *Sim) v2(ordinal int, symbol string) *failure {
	if _, f := s.device(ordinal); f != nil {
		return f
	}
	if s.cfg.DriverVersion >= bindV2Version {
		return nil
	}
	return &failure{raw: &missingSymbol{&loader.SymbolError{Name: symbol, Version: bindV2Version, Status: loader.SymbolNotFound}}}
}

// boundFor returns the device memory p is bound for: its own with dev -1 (the 13.0 calls),
// else dev, if p may be bound for it: device memory only for its own device, host NUMA
// memory only for a device whose HOST_NUMA_ID is the memory's node.
func (s *Sim) boundFor(p *phys, dev int) (int, *failure) {
	switch {
	case dev < 0:
		return p.dev, nil
	case p.dev >= 0 && p.dev != dev:
		return 0, fail(cu.ERROR_INVALID_DEVICE, "device memory is bound only for the device it was created on")
	case p.dev >= 0:
		return dev, nil
	case p.prop.Location.Type != cu.MEM_LOCATION_TYPE_HOST_NUMA:
		return 0, fail(cu.ERROR_INVALID_VALUE, "host memory that is not of a NUMA node")
	case int(p.prop.Location.ID) != s.cfg.Devices[dev].attribute(cu.DEVICE_ATTRIBUTE_HOST_NUMA_ID):
		return 0, fail(cu.ERROR_INVALID_DEVICE, "host NUMA memory is bound only for a device whose HOST_NUMA_ID is its node")
	}
	return dev, nil
}

// MulticastBindMemV2 is cuMulticastBindMem_v2 (CUDA 13.1): cuMulticastBindMem for device
// ordinal. With a DriverVersion below 13010 it fails as cu does on a driver without the
// symbol (once the ordinal is known to be a device, as cu resolves it first).
func (s *Sim) MulticastBindMemV2(mc cu.MemHandle, ordinal int, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error {
	f := s.do(OpMulticastBindMemV2, func() *failure {
		if f := s.v2(ordinal, "cuMulticastBindMem_v2"); f != nil {
			return f
		}
		return s.bindMem(mc, ordinal, mcOffset, mem, memOffset, size, flags)
	})
	if f != nil {
		return f.wrap("cuMulticastBindMem_v2", "%v+%d, device %d, %v+%d, %d, flags %d", mc, mcOffset, ordinal, mem, memOffset, size, flags)
	}
	return nil
}

// MulticastBindAddrV2 is cuMulticastBindAddr_v2 (CUDA 13.1): cuMulticastBindAddr for device
// ordinal, refused as MulticastBindMemV2 is on an older driver.
func (s *Sim) MulticastBindAddrV2(mc cu.MemHandle, ordinal int, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error {
	f := s.do(OpMulticastBindAddrV2, func() *failure {
		if f := s.v2(ordinal, "cuMulticastBindAddr_v2"); f != nil {
			return f
		}
		return s.bindAddr(mc, ordinal, mcOffset, uint64(ptr), size, flags)
	})
	if f != nil {
		return f.wrap("cuMulticastBindAddr_v2", "%v+%d, device %d, %v, %d, flags %d", mc, mcOffset, ordinal, ptr, size, flags)
	}
	return nil
}
