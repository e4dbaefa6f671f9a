package vmm

import (
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
)

// Multicast binds across driver versions. CUDA 13.1 added cuMulticastBindMem_v2 and
// cuMulticastBindAddr_v2, which name the device the binding is for: for device memory that
// is the memory's own device, which the 13.0 calls infer; host NUMA memory only they can
// bind. A Multicast tries the 13.1 call first and, if the backend lacks it (an error
// matching loader.ErrNotSupported: a missing symbol, never a driver's result), remembers
// that and makes the 13.0 call from then on.

// What Multicast.binds13 holds once known.
const (
	bindsV2 = 1 // the backend has CUDA 13.1's binds
	bindsV1 = 2 // it has only 13.0's
)

// v2 makes a 13.1 call unless the backend is known to lack it. made is false where the
// backend lacks it; err is then the missing symbol's error.
func (mc *Multicast) v2(call func() error) (made bool, err error) {
	if mc.binds13.Load() == bindsV1 {
		return false, errNoV2
	}
	err = call()
	if errors.Is(err, loader.ErrNotSupported) { // a driver entry point the backend lacks
		mc.binds13.Store(bindsV1)
		return false, err
	}
	mc.binds13.Store(bindsV2)
	return true, err
}

var errNoV2 = fmt.Errorf("%w: the driver has no cuMulticastBindMem_v2 or cuMulticastBindAddr_v2", loader.ErrNotSupported)

// needsV2 is the error of binding host memory where the driver has only the 13.0 calls.
func needsV2(missing, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: binding host memory names the device it is for, which only CUDA 13.1's cuMulticastBindMem_v2 does (%w)", ErrUnsupported, missing)
	}
	return fmt.Errorf("%w: binding host memory names the device it is for, which only CUDA 13.1's cuMulticastBindAddr_v2 does (%w); cuMulticastBindAddr: %w", ErrUnsupported, missing, cause)
}

// bindMem binds memory h (device memory when device is true, host memory otherwise) for
// device dev.
func (mc *Multicast) bindMem(dev int, off uint64, h cu.MemHandle, memOffset, size uint64, device bool) error {
	made, err := mc.v2(func() error { return mc.m.b.MulticastBindMemV2(mc.h, dev, off, h, memOffset, size, 0) })
	switch {
	case made:
		return err
	case !device:
		return needsV2(err, nil)
	}
	return mc.m.b.MulticastBindMem(mc.h, off, h, memOffset, size, 0)
}

// bindAddr binds the memory mapped at addr for device dev.
func (mc *Multicast) bindAddr(dev int, off uint64, addr cu.DevicePtr, size uint64) error {
	made, err := mc.v2(func() error { return mc.m.b.MulticastBindAddrV2(mc.h, dev, off, addr, size, 0) })
	if made {
		return err
	}
	missing := err
	err = mc.m.b.MulticastBindAddr(mc.h, off, addr, size, 0)
	if err != nil && mc.hostMemoryAt(addr) {
		return needsV2(missing, err)
	}
	return err
}

// hostMemoryAt reports whether addr maps host memory, for the error of a failed 13.0 bind.
func (mc *Multicast) hostMemoryAt(addr cu.DevicePtr) bool {
	h, err := mc.m.b.Retain(addr)
	if err != nil {
		return false
	}
	p, err := mc.m.b.Properties(h)
	_ = mc.m.releaseRetained(h) // a refusal stays in the Manager's Pending list
	return err == nil && p.Location.Type != cu.MEM_LOCATION_TYPE_DEVICE
}
