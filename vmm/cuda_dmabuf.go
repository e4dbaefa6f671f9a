package vmm

import "github.com/cuvmm/cuvmm/cu"

// ExportDmaBuf asks from device 0's primary context, as AddressRange does: whether the call
// needs a current context is not recorded (cu's TestGPUDmaBufFD logs it), and with unified
// addressing any device's context names the same addresses.
func (b *cudaBackend) ExportDmaBuf(ptr cu.DevicePtr, size, flags uint64) (int, error) {
	c, err := b.ctx(0)
	if err != nil {
		return -1, err
	}
	fd := -1
	err = c.Do(func() error {
		var err error
		fd, err = cu.MemGetDmaBufFD(ptr, size, flags)
		return err
	})
	if err != nil {
		return -1, err
	}
	return fd, nil
}
