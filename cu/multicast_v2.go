package cu

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

// MulticastBindMemV2 binds size bytes of mem, from memOffset, to mc at mcOffset for device
// dev (cuMulticastBindMem_v2, CUDA 13.1). On a driver without the call it fails, before
// looking at the handles, with an error matching ERROR_NOT_SUPPORTED and
// loader.ErrNotSupported.
func MulticastBindMemV2(mc MemHandle, dev Device, mcOffset uint64, mem MemHandle, memOffset, size uint64, flags uint64) error {
	if err := procMulticastBindMem_v2.Find(); err != nil {
		return wrap(symbolErr(err), "cuMulticastBindMem_v2", "%v+%d, device %d, %v+%d, %d, flags %d", mc, mcOffset, dev, mem, memOffset, size, flags)
	}
	if err := cuMulticastBindMem_v2(mc, dev, mcOffset, mem, memOffset, size, flags); err != nil {
		return wrap(err, "cuMulticastBindMem_v2", "%v+%d, device %d, %v+%d, %d, flags %d", mc, mcOffset, dev, mem, memOffset, size, flags)
	}
	return nil
}

// MulticastBindAddrV2 binds the memory mapped at ptr to mc at mcOffset for device dev
// (cuMulticastBindAddr_v2, CUDA 13.1). On a driver without the call it fails, before
// looking at the handle, with an error matching ERROR_NOT_SUPPORTED and
// loader.ErrNotSupported.
func MulticastBindAddrV2(mc MemHandle, dev Device, mcOffset uint64, ptr DevicePtr, size uint64, flags uint64) error {
	if err := procMulticastBindAddr_v2.Find(); err != nil {
		return wrap(symbolErr(err), "cuMulticastBindAddr_v2", "%v+%d, device %d, %v, %d, flags %d", mc, mcOffset, dev, ptr, size, flags)
	}
	if err := cuMulticastBindAddr_v2(mc, dev, mcOffset, ptr, size, flags); err != nil {
		return wrap(err, "cuMulticastBindAddr_v2", "%v+%d, device %d, %v, %d, flags %d", mc, mcOffset, dev, ptr, size, flags)
	}
	return nil
}
