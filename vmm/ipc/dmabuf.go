package ipc

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// dma-bufs over the socket: a descriptor from vmm's dma-buf exports (Reservation.ExportDmaBuf,
// buffer.Buffer.ExportDmaBuf, sparse.Array.ExportDmaBuf) sent to the process that drives
// the NIC, which registers it (ibv_reg_dmabuf_mr). One message carries one descriptor and
// what it is (DmaBufHeader): it is not an allocation to import, so it travels as a message
// of its own kind, which Receive refuses and ReceiveDmaBuf takes.

// DmaBufHeader is what a dma-buf message says about its descriptor.
type DmaBufHeader struct {
	// Addr is the exporter's device address of the first byte (the iova an RDMA
	// registration may use), Size the descriptor's size.
	Addr cu.DevicePtr
	Size uint64
	// Device is the exporter's device ordinal, -1 for host memory.
	Device int
	// Chunks is the number of mappings behind the range at the exporter.
	Chunks int
	// PCIe says the export asked for a mapping through PCIe BAR1.
	PCIe bool
	// Generation is the exporter's generation of the range (vmm.DmaBuf.Generation).
	Generation uint64
}

// headerOf is what a message says of d.
func headerOf(d *vmm.DmaBuf) DmaBufHeader {
	return DmaBufHeader{Addr: d.Addr, Size: d.Size, Device: d.Device, Chunks: d.Chunks, PCIe: d.PCIe, Generation: d.Generation}
}

func (h DmaBufHeader) validate() error {
	switch {
	case h.Size == 0:
		return fmt.Errorf("%w: dma-buf of size 0", ErrProtocol)
	case uint64(h.Addr)+h.Size < uint64(h.Addr):
		return fmt.Errorf("%w: dma-buf range %v+%d wraps", ErrProtocol, h.Addr, h.Size)
	case h.Device < -1 || h.Device > 1<<20:
		return fmt.Errorf("%w: device %d", ErrProtocol, h.Device)
	case h.Chunks < 0 || h.Chunks > 1<<31-1:
		return fmt.Errorf("%w: %d chunks", ErrProtocol, h.Chunks)
	}
	return nil
}

// dmaBufOf wraps a received descriptor.
func dmaBufOf(fd int, h DmaBufHeader) *vmm.DmaBuf {
	d := vmm.NewDmaBuf(fd, h.Addr, h.Size)
	d.Device, d.Chunks, d.PCIe, d.Generation = h.Device, h.Chunks, h.PCIe, h.Generation
	return d
}
