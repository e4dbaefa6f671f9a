package cu

// Multicast objects (CUDA 12.1). Creating one on a shared multi-GPU host can put the GPUs
// out of service for everyone: callers decide; this package only forwards.

// MulticastGetGranularity returns the granularity of multicast objects with prop.
func MulticastGetGranularity(prop *MulticastObjectProp, option MulticastGranularityFlags) (uint64, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if prop == nil {
		return 0, wrap(invalidArg("nil properties"), "cuMulticastGetGranularity", "nil, %d", option)
	}
	g, err := cuMulticastGetGranularity(prop, option)
	if err != nil {
		return 0, wrap(err, "cuMulticastGetGranularity", "%+v, %d", *prop, option)
	}
	return g, nil
}

// MulticastCreate creates a multicast object (cuMulticastCreate). Release it with MemRelease.
func MulticastCreate(prop *MulticastObjectProp) (MemHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	if prop == nil {
		return 0, wrap(invalidArg("nil properties"), "cuMulticastCreate", "nil")
	}
	h, err := cuMulticastCreate(prop)
	if err != nil {
		return 0, wrap(err, "cuMulticastCreate", "%+v", *prop)
	}
	return h, nil
}

// MulticastAddDevice adds a device to a multicast object (cuMulticastAddDevice).
func MulticastAddDevice(mc MemHandle, dev Device) error {
	if err := cuMulticastAddDevice(mc, dev); err != nil {
		return wrap(err, "cuMulticastAddDevice", "%v, device %d", mc, dev)
	}
	return nil
}

// MulticastBindMem binds size bytes of mem, from memOffset, to mc at mcOffset.
func MulticastBindMem(mc MemHandle, mcOffset uint64, mem MemHandle, memOffset, size uint64, flags uint64) error {
	if err := cuMulticastBindMem(mc, mcOffset, mem, memOffset, size, flags); err != nil {
		return wrap(err, "cuMulticastBindMem", "%v+%d, %v+%d, %d, flags %d", mc, mcOffset, mem, memOffset, size, flags)
	}
	return nil
}

// MulticastBindAddr binds the memory mapped at ptr to mc at mcOffset.
func MulticastBindAddr(mc MemHandle, mcOffset uint64, ptr DevicePtr, size uint64, flags uint64) error {
	if err := cuMulticastBindAddr(mc, mcOffset, ptr, size, flags); err != nil {
		return wrap(err, "cuMulticastBindAddr", "%v+%d, %v, %d, flags %d", mc, mcOffset, ptr, size, flags)
	}
	return nil
}

// MulticastUnbind unbinds dev's memory from mc at [mcOffset, mcOffset+size).
func MulticastUnbind(mc MemHandle, dev Device, mcOffset, size uint64) error {
	if err := cuMulticastUnbind(mc, dev, mcOffset, size); err != nil {
		return wrap(err, "cuMulticastUnbind", "%v, device %d, %d, %d", mc, dev, mcOffset, size)
	}
	return nil
}
