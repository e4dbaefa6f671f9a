package ipc

import (
	"encoding/binary"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// dma-bufs over the socket: a descriptor from vmm's dma-buf exports (Reservation.ExportDmaBuf,
// buffer.Buffer.ExportDmaBuf, sparse.Array.ExportDmaBuf) sent to the process that drives
// the NIC, which registers it (ibv_reg_dmabuf_mr). One message carries one descriptor and
// a fixed header (DmaBufHeader): it is not an allocation to import (Import refuses it), so
// it travels in a message of its own kind, which Receive refuses and ReceiveDmaBuf takes.

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

const (
	dmaBufMagic   = "CUVMMDBF"
	dmaBufVersion = 1
	// magic 8, version 2, flags 2, device 4, chunks 4, reserved 4, addr 8, size 8,
	// generation 8
	dmaBufMsgLen = 48
	dmaBufPCIe   = 1 // flag bit
)

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

// MarshalBinary encodes the header as it travels: little-endian, versioned.
func (h DmaBufHeader) MarshalBinary() ([]byte, error) {
	if err := h.validate(); err != nil {
		return nil, opError("encode dma-buf header", "", err)
	}
	return h.encode(), nil
}

func (h DmaBufHeader) encode() []byte {
	b := make([]byte, dmaBufMsgLen)
	le := binary.LittleEndian
	copy(b, dmaBufMagic)
	le.PutUint16(b[8:], dmaBufVersion)
	if h.PCIe {
		le.PutUint16(b[10:], dmaBufPCIe)
	}
	le.PutUint32(b[12:], uint32(int32(h.Device)))
	le.PutUint32(b[16:], uint32(h.Chunks))
	le.PutUint64(b[24:], uint64(h.Addr))
	le.PutUint64(b[32:], h.Size)
	le.PutUint64(b[40:], h.Generation)
	return b
}

// UnmarshalBinary decodes and validates a header.
func (h *DmaBufHeader) UnmarshalBinary(b []byte) error {
	if err := h.decode(b); err != nil {
		return opError("decode dma-buf header", fmt.Sprintf("of %d bytes", len(b)), err)
	}
	return nil
}

func (h *DmaBufHeader) decode(b []byte) error {
	if err := checkDmaBufPrefix(b); err != nil {
		return err
	}
	if len(b) != dmaBufMsgLen {
		return fmt.Errorf("%w: dma-buf header of %d bytes, want %d", ErrProtocol, len(b), dmaBufMsgLen)
	}
	le := binary.LittleEndian
	d := DmaBufHeader{
		PCIe:       le.Uint16(b[10:])&dmaBufPCIe != 0,
		Device:     int(int32(le.Uint32(b[12:]))),
		Chunks:     int(le.Uint32(b[16:])),
		Addr:       cu.DevicePtr(le.Uint64(b[24:])),
		Size:       le.Uint64(b[32:]),
		Generation: le.Uint64(b[40:]),
	}
	if err := d.validate(); err != nil {
		return err
	}
	*h = d
	return nil
}

// checkDmaBufPrefix checks as much of a dma-buf header as b holds, so that a receiver
// refuses a bad one at its first wrong byte.
func checkDmaBufPrefix(b []byte) error {
	if n := min(len(b), len(dmaBufMagic)); string(b[:n]) != dmaBufMagic[:n] {
		return fmt.Errorf("%w: bad dma-buf magic %q", ErrProtocol, b[:n])
	}
	le := binary.LittleEndian
	if len(b) >= 10 {
		if v := le.Uint16(b[8:]); v != dmaBufVersion {
			return fmt.Errorf("%w: dma-buf message version %d, want %d", ErrProtocol, v, dmaBufVersion)
		}
	}
	if len(b) >= 12 {
		if f := le.Uint16(b[10:]); f&^dmaBufPCIe != 0 {
			return fmt.Errorf("%w: unknown dma-buf flags %#04x", ErrProtocol, f)
		}
	}
	if len(b) >= 24 {
		if r := le.Uint32(b[20:]); r != 0 {
			return fmt.Errorf("%w: reserved bytes %#08x, want 0", ErrProtocol, r)
		}
	}
	return nil
}

// dmaBufOf wraps a received descriptor.
func dmaBufOf(fd int, h DmaBufHeader) *vmm.DmaBuf {
	d := vmm.NewDmaBuf(fd, h.Addr, h.Size)
	d.Device, d.Chunks, d.PCIe, d.Generation = h.Device, h.Chunks, h.PCIe, h.Generation
	return d
}
