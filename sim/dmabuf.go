package sim

import (
	"fmt"
	"os"

	"github.com/cuvmm/cuvmm/cu"
)

// dma-buf export (cuMemGetHandleForAddressRange with MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD).
//
// The header states the rules (cuda.h 13.0, cuMemGetHandleForAddressRange): the device must
// support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED); the range must be aligned to the
// host page size at both ends and, for a range from cuMemAddressReserve, mapped whole;
// every allocation behind it must be resident on one device and have identical allocation
// properties; flags is 0 or CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE. The driver keeps
// only some of them (vmmtest's dmabuf/ cases, recorded on two H200s with driver 580):
// allocations that differ in GPUDirect RDMA capability or in shareable handle types export
// together; compressible memory does not export at all, with CUDA_ERROR_UNKNOWN; host-located
// memory is refused as an invalid value; and the PCIe flag is not supported on those x86
// machines, whose GPUs a NIC reaches through PCIe anyway (Device.DmaBufPCIe models a
// platform where it is). Each result is named once below.
//
// A descriptor sim exports is a sealed memfd (Linux; elsewhere the export fails with
// CUDA_ERROR_NOT_SUPPORTED, as dma-bufs are a Linux kernel object) whose size is the
// range's, as a dma-buf's size is (lseek to SEEK_END tells it), and whose name describes
// what it was exported from: DmaBufInfo reads it in any process the descriptor reaches.
// Unlike the kernel's dma-buf, which holds the memory until its last descriptor closes,
// sim's holds nothing: Stats do not count it, and closing it is the caller's business.
var (
	// A flag other than CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE (recorded:
	// dmabuf/unknown-flag).
	resDmaBufFlags = cu.ERROR_INVALID_VALUE
	// Size 0 (recorded: dmabuf/size-zero), or a range that wraps around the address space.
	resDmaBufSize = cu.ERROR_INVALID_VALUE
	// A start or size that is not a multiple of the host page size (recorded:
	// dmabuf/misaligned-address, dmabuf/misaligned-size).
	resDmaBufAlign = cu.ERROR_INVALID_VALUE
	// A byte of the range that no mapping backs: a hole, a range past the mapping's end, an
	// address nothing is reserved at (recorded: dmabuf/hole, dmabuf/past-mapping-end,
	// dmabuf/freed-reservation).
	resDmaBufHole = cu.ERROR_INVALID_VALUE
	// A multicast object's mapping in the range (not recorded: multicast objects are not
	// made on the shared machines).
	resDmaBufMulticast = cu.ERROR_INVALID_VALUE
	// Host-located VMM memory (recorded: dmabuf/host-memory).
	resDmaBufHost = cu.ERROR_INVALID_VALUE
	// A device whose CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0, or a platform without
	// dma-bufs.
	resDmaBufUnsupported = cu.ERROR_NOT_SUPPORTED
	// Allocations of two devices behind one range (recorded: dmabuf/two-devices).
	resDmaBufDevices = cu.ERROR_INVALID_VALUE
	// Compressible memory anywhere in the range (recorded: dmabuf/compressible,
	// dmabuf/compressible-and-not, where it is the range's first chunk).
	resDmaBufCompressible = cu.ERROR_UNKNOWN
	// CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE on a range that exports without it, on a
	// device without Device.DmaBufPCIe (recorded: dmabuf/pcie, dmabuf/multi-chunk-pcie).
	resDmaBufPCIe = cu.ERROR_NOT_SUPPORTED
)

// hostPageSize is the host page size, to which the range of a dma-buf must be aligned.
var hostPageSize = uint64(os.Getpagesize())

// DmaBuf describes a dma-buf descriptor sim exported: the range it was exported from and the
// memory behind it.
type DmaBuf struct {
	Addr cu.DevicePtr
	Size uint64
	// Device is the device the memory behind the range is resident on.
	Device int
	// Props are the allocation properties of the first allocation behind the range, as
	// cuMemGetAllocationPropertiesFromHandle reports them on the handle that created it
	// (the others may differ in GPUDirect RDMA capability and shareable handle types).
	Props cu.MemAllocationProp
	// Chunks is the number of mappings behind the range.
	Chunks int
	// Flags are the flags of the export (0 or cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE).
	Flags uint64
}

func (d DmaBuf) String() string {
	return fmt.Sprintf("dma-buf %v+%d of device %d (%d chunks, flags %#x, props %+v)", d.Addr, d.Size, d.Device, d.Chunks, d.Flags, d.Props)
}

// DmaBufInfo describes a descriptor that a Sim's ExportDmaBuf returned, in this process or
// in another one the descriptor was passed to. It fails for any other descriptor (a real
// dma-buf among them), and everywhere but Linux. The description is the descriptor's own:
// a process can make a sealed memfd that describes memory it does not have, so DmaBufInfo
// tells what a descriptor says it is (and refuses what ExportDmaBuf could not have said),
// not that a Sim made it.
func DmaBufInfo(fd int) (DmaBuf, error) {
	d, err := describeDmaBuf(fd)
	if err != nil {
		return DmaBuf{}, fmt.Errorf("sim: descriptor %d: %w", fd, err)
	}
	return d, nil
}

// ExportDmaBuf is cuMemGetHandleForAddressRange with MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: a
// descriptor the caller owns, which DmaBufInfo describes. See the rules above.
func (s *Sim) ExportDmaBuf(ptr cu.DevicePtr, size, flags uint64) (int, error) {
	fd, f := locked(s, OpExportDmaBuf, func() (int, *failure) { return s.exportDmaBuf(uint64(ptr), size, flags) })
	if f != nil {
		return -1, f.wrap("cuMemGetHandleForAddressRange", "%v, %d, DMA_BUF_FD, flags %d", ptr, size, flags)
	}
	return fd, nil
}

func (s *Sim) exportDmaBuf(addr, size, flags uint64) (int, *failure) {
	switch {
	case flags&^cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE != 0:
		return -1, fail(resDmaBufFlags, "flags must be 0 or CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE")
	case size == 0:
		return -1, fail(resDmaBufSize, "size 0")
	case addr+size < addr:
		return -1, fail(resDmaBufSize, "the range wraps around the address space")
	case addr%hostPageSize != 0 || size%hostPageSize != 0:
		return -1, fail(resDmaBufAlign, fmt.Sprintf("the address and size must be multiples of the host page size (%d)", hostPageSize))
	}
	d, f := s.dmaBufRange(addr, size)
	if f != nil {
		return -1, f
	}
	d.Flags = flags
	if flags&cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE != 0 && !s.cfg.Devices[d.Device].DmaBufPCIe {
		return -1, fail(resDmaBufPCIe, "no dma-buf mapping through PCIe BAR1 on this platform")
	}
	fd, err := newDmaBufFD(d)
	if err != nil {
		return -1, fail(resDmaBufUnsupported, err.Error())
	}
	return fd, nil
}

// dmaBufRange checks what backs [addr, addr+size) against the rules and describes it.
func (s *Sim) dmaBufRange(addr, size uint64) (DmaBuf, *failure) {
	d := DmaBuf{Addr: cu.DevicePtr(addr), Size: size}
	var first *phys
	next := addr // the first byte not yet seen backed
	var f *failure
	s.va.overlapping(addr, size, func(m *mapping) bool {
		if m.base > next {
			return false // a hole before m: reported below
		}
		p := m.h.mem
		switch {
		case p == nil:
			f = fail(resDmaBufMulticast, fmt.Sprintf("the mapping at %#x is a multicast object's", m.base))
		case first == nil:
			first = p
			d.Device, d.Props = p.dev, p.prop
		case p.dev != first.dev:
			f = fail(resDmaBufDevices, fmt.Sprintf("the mapping at %#x is memory of %s, the range starts with memory of %s", m.base, devName(p.dev), devName(first.dev)))
		}
		if f == nil && p != nil && p.prop.CompressionType != cu.MEM_ALLOCATION_COMP_NONE {
			f = fail(resDmaBufCompressible, fmt.Sprintf("the mapping at %#x is compressible memory", m.base))
		}
		d.Chunks++
		next = m.end()
		return f == nil
	})
	if f != nil {
		return d, f
	}
	if next < addr+size {
		return d, fail(resDmaBufHole, fmt.Sprintf("nothing is mapped at %#x (offset %d of the range)", next, next-addr))
	}
	if first.dev < 0 {
		return d, fail(resDmaBufHost, "host-located memory")
	}
	if s.cfg.Devices[first.dev].attribute(cu.DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) == 0 {
		return d, fail(resDmaBufUnsupported, fmt.Sprintf("device %d does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)", first.dev))
	}
	return d, nil
}

func devName(dev int) string {
	if dev < 0 {
		return "the host"
	}
	return fmt.Sprintf("device %d", dev)
}
