package cu

// Multicast objects (CUDA 12.1). Creating one on a shared multi-GPU host can put the GPUs
// out of service for everyone: callers decide; this package only forwards. The calls that
// take a multicast object (add a device, bind, unbind) are generated (zwrappers.go).

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

// The multicast binds of CUDA 13.1 that name the device the binding is for
// (cuMulticastBindMem_v2, cuMulticastBindAddr_v2). They are optional symbols: a 13.0
// driver has neither, and cuvmm supports it. What they add over cuMulticastBindMem and
// cuMulticastBindAddr is host memory: NVIDIA's 13.1 reference has device memory bound only
// for the device it was created on (as the 13.0 calls, which take that device from the
// memory), and host NUMA memory (MEM_LOCATION_TYPE_HOST_NUMA) bound for a device whose
// HOST_NUMA_ID is the memory's NUMA node, which the 13.0 calls cannot say.

// HasMulticastBindV2 reports whether the driver has cuMulticastBindMem_v2 and
// cuMulticastBindAddr_v2 (CUDA 13.1), resolving both without calling either. It is false
// when no driver can be loaded.
func HasMulticastBindV2() bool {
	return procMulticastBindMem_v2.Find() == nil && procMulticastBindAddr_v2.Find() == nil
}
