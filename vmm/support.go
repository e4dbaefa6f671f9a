package vmm

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
)

// ErrUnsupported: a request asks for something the device says it lacks (GPUDirect RDMA
// with VMM, compression, host or host-NUMA memory, a shareable handle type), caught before
// any memory is made. It also matches cu.ERROR_NOT_SUPPORTED.
var ErrUnsupported error = &matching{"not supported by the device", []error{cu.ERROR_NOT_SUPPORTED}}

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
