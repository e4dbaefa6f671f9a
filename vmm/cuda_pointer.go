package vmm

import "github.com/cuvmm/cuvmm/cu"

// The forwarders of pointer classification and of CUDA 13.1's multicast binds.

func (b *cudaBackend) PointerAttributes(ordinal int, ptr cu.DevicePtr) (cu.PointerAttributes, error) {
	c, err := b.ctx(ordinal)
	if err != nil {
		return cu.PointerAttributes{}, err
	}
	return c.PointerAttributes(ptr)
}

func (b *cudaBackend) MulticastBindMemV2(mc cu.MemHandle, ordinal int, mcOffset uint64, mem cu.MemHandle, memOffset, size, flags uint64) error {
	d, err := b.dev(ordinal)
	if err != nil {
		return err
	}
	return cu.MulticastBindMemV2(mc, d, mcOffset, mem, memOffset, size, flags)
}

func (b *cudaBackend) MulticastBindAddrV2(mc cu.MemHandle, ordinal int, mcOffset uint64, ptr cu.DevicePtr, size, flags uint64) error {
	d, err := b.dev(ordinal)
	if err != nil {
		return err
	}
	return cu.MulticastBindAddrV2(mc, d, mcOffset, ptr, size, flags)
}
