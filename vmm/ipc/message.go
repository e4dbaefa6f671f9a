package ipc

import (
	"encoding/binary"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
)

// The one message that carries descriptors over a socket, little-endian: a prefix of 16
// bytes (magic "CUVMMIPC", version, kind, descriptor count, reserved) and a body by kind.
//
//	kind 1, allocations: handle type 2, reserved 6, granularity 8, the sizes 8 each
//	kind 2, a dma-buf:    flags 2, reserved 2, device 4, chunks 4, reserved 4,
//	                      address 8, size 8, generation 8
//
// A receiver reading a stream checks each byte as it comes (checkPrefix), so that it
// refuses a bad message at its first wrong byte and takes no more descriptors than the
// count says.
const (
	msgMagic      = "CUVMMIPC"
	msgVersion    = 2
	msgPrefix     = 16
	kindMemory    = 1
	kindDmaBuf    = 2
	memoryFixed   = msgPrefix + 16
	dmaBufLen     = msgPrefix + 40
	maxMsgLen     = memoryFixed + 8*MaxDescriptors
	dmaBufPCIe    = 1 // flag bit
	msgCountAt    = 12
	msgKindAt     = 10
	msgReservedAt = 14
)

var kindNames = [...]string{kindMemory: "an allocations message", kindDmaBuf: "a dma-buf message"}

// msgLen is the length of a message of kind with count descriptors.
func msgLen(kind uint16, count int) int {
	if kind == kindDmaBuf {
		return dmaBufLen
	}
	return memoryFixed + 8*count
}

// checkPrefix checks as much of a message of kind as b holds and returns its descriptor
// count once b holds it, 0 before.
func checkPrefix(b []byte, kind uint16) (count int, err error) {
	le := binary.LittleEndian
	if n := min(len(b), len(msgMagic)); string(b[:n]) != msgMagic[:n] {
		return 0, fmt.Errorf("%w: bad magic %q", ErrProtocol, b[:n])
	}
	if len(b) >= msgKindAt {
		if v := le.Uint16(b[8:]); v != msgVersion {
			return 0, fmt.Errorf("%w: version %d, want %d", ErrProtocol, v, msgVersion)
		}
	}
	if len(b) >= msgCountAt {
		if k := le.Uint16(b[msgKindAt:]); k != kind {
			if int(k) < len(kindNames) && kindNames[k] != "" {
				return 0, fmt.Errorf("%w: %s, where %s was expected", ErrProtocol, kindNames[k], kindNames[kind])
			}
			return 0, fmt.Errorf("%w: message of kind %d", ErrProtocol, k)
		}
	}
	if len(b) >= msgReservedAt {
		count = int(le.Uint16(b[msgCountAt:]))
		if kind == kindDmaBuf && count != 1 {
			return 0, fmt.Errorf("%w: %d descriptors in a dma-buf message, want 1", ErrProtocol, count)
		}
		if count == 0 || count > MaxDescriptors {
			return 0, fmt.Errorf("%w: %d descriptors (1 to %d)", ErrProtocol, count, MaxDescriptors)
		}
	}
	zero := func(from, to int) error {
		for i := from; i < min(to, len(b)); i++ {
			if b[i] != 0 {
				return fmt.Errorf("%w: reserved byte %d is %#02x, want 0", ErrProtocol, i, b[i])
			}
		}
		return nil
	}
	if err := zero(msgReservedAt, msgPrefix); err != nil {
		return 0, err
	}
	if kind == kindMemory {
		return count, zero(msgPrefix+2, memoryFixed-8)
	}
	if len(b) >= msgPrefix+2 {
		if f := le.Uint16(b[msgPrefix:]); f&^dmaBufPCIe != 0 {
			return 0, fmt.Errorf("%w: unknown dma-buf flags %#04x", ErrProtocol, f)
		}
	}
	if err := zero(msgPrefix+2, msgPrefix+4); err != nil {
		return 0, err
	}
	return count, zero(msgPrefix+12, msgPrefix+16)
}

// frame starts a message of kind with count descriptors.
func frame(kind uint16, count int) []byte {
	b := make([]byte, msgLen(kind, count))
	copy(b, msgMagic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], msgVersion)
	le.PutUint16(b[msgKindAt:], kind)
	le.PutUint16(b[msgCountAt:], uint16(count))
	return b
}

// unframe checks that b is a whole message of kind and returns its body.
func unframe(b []byte, kind uint16) ([]byte, error) {
	count, err := checkPrefix(b, kind)
	if err != nil {
		return nil, err
	}
	if len(b) < msgPrefix {
		return nil, fmt.Errorf("%w: message of %d bytes, shorter than any", ErrProtocol, len(b))
	}
	if n := msgLen(kind, count); len(b) != n {
		return nil, fmt.Errorf("%w: message of %d bytes, want %d", ErrProtocol, len(b), n)
	}
	return b[msgPrefix:], nil
}

// MarshalBinary encodes the header as the message it travels in.
func (h Header) MarshalBinary() ([]byte, error) {
	b, err := h.encode()
	return b, opError("encode header", fmt.Sprintf("%d sizes", len(h.Sizes)), err)
}

func (h Header) encode() ([]byte, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	b := frame(kindMemory, len(h.Sizes))
	le := binary.LittleEndian
	le.PutUint16(b[msgPrefix:], uint16(h.HandleType))
	le.PutUint64(b[memoryFixed-8:], h.Granularity)
	for i, s := range h.Sizes {
		le.PutUint64(b[memoryFixed+8*i:], s)
	}
	return b, nil
}

// UnmarshalBinary decodes and validates a header from the message it travels in.
func (h *Header) UnmarshalBinary(b []byte) error {
	err := h.decode(b)
	return opError("decode header", fmt.Sprintf("of %d bytes", len(b)), err)
}

func (h *Header) decode(b []byte) error {
	body, err := unframe(b, kindMemory)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	d := Header{
		HandleType:  cu.MemHandleType(le.Uint16(body)),
		Granularity: le.Uint64(body[8:]),
		Sizes:       make([]uint64, (len(body)-16)/8),
	}
	for i := range d.Sizes {
		d.Sizes[i] = le.Uint64(body[16+8*i:])
	}
	if err := d.validate(); err != nil {
		return err
	}
	*h = d
	return nil
}

// DmaBufHeader is what a dma-buf message says about its descriptor: a dma-buf of vmm's
// exports (Reservation.ExportDmaBuf, buffer.Buffer.ExportDmaBuf, sparse.Array.ExportDmaBuf)
// sent to the process that drives a NIC, which registers it (ibv_reg_dmabuf_mr). It is not
// an allocation to import, so it travels in a message of its own kind, which Receive
// refuses and ReceiveDmaBuf takes.
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

// MarshalBinary encodes the header as the message it travels in.
func (h DmaBufHeader) MarshalBinary() ([]byte, error) {
	b, err := h.encode()
	return b, opError("encode dma-buf header", "", err)
}

func (h DmaBufHeader) encode() ([]byte, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	b := frame(kindDmaBuf, 1)
	body := b[msgPrefix:]
	le := binary.LittleEndian
	if h.PCIe {
		le.PutUint16(body, dmaBufPCIe)
	}
	le.PutUint32(body[4:], uint32(int32(h.Device)))
	le.PutUint32(body[8:], uint32(h.Chunks))
	le.PutUint64(body[16:], uint64(h.Addr))
	le.PutUint64(body[24:], h.Size)
	le.PutUint64(body[32:], h.Generation)
	return b, nil
}

// UnmarshalBinary decodes and validates a header from the message it travels in.
func (h *DmaBufHeader) UnmarshalBinary(b []byte) error {
	err := h.decode(b)
	return opError("decode dma-buf header", fmt.Sprintf("of %d bytes", len(b)), err)
}

func (h *DmaBufHeader) decode(b []byte) error {
	body, err := unframe(b, kindDmaBuf)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	d := DmaBufHeader{
		PCIe:       le.Uint16(body)&dmaBufPCIe != 0,
		Device:     int(int32(le.Uint32(body[4:]))),
		Chunks:     int(le.Uint32(body[8:])),
		Addr:       cu.DevicePtr(le.Uint64(body[16:])),
		Size:       le.Uint64(body[24:]),
		Generation: le.Uint64(body[32:]),
	}
	if err := d.validate(); err != nil {
		return err
	}
	*h = d
	return nil
}
