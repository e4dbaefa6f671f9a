package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/cuvmm/cuvmm/cu"
	"golang.org/x/sys/unix"
)

// dmaBufName prefixes the name of the memfd of a dma-buf sim exported; the rest describes it.
const dmaBufName = "cuvmm-sim.dmabuf:"

// dmaBufFormat is the whole name: the prefix, then the address (hex), size, device, chunks,
// flags, and the allocation properties (type, handle types, location type, location id,
// compression, GPUDirect RDMA, usage, colon-separated).
const dmaBufFormat = dmaBufName + "a=%x,s=%d,d=%d,n=%d,f=%d,p=%d:%d:%d:%d:%d:%d:%d"

func encodeDmaBuf(d DmaBuf) string {
	p := d.Props
	return fmt.Sprintf(dmaBufFormat, uint64(d.Addr), d.Size, d.Device, d.Chunks, d.Flags,
		p.Type, p.RequestedHandleTypes, p.Location.Type, p.Location.ID, p.CompressionType, p.GPUDirectRDMACapable, p.Usage)
}

var errNotDmaBuf = errors.New("not a dma-buf sim exported")

func decodeDmaBuf(name string) (DmaBuf, error) {
	var d DmaBuf
	var addr uint64
	p := &d.Props
	_, err := fmt.Sscanf(name, dmaBufFormat, &addr, &d.Size, &d.Device, &d.Chunks, &d.Flags,
		&p.Type, &p.RequestedHandleTypes, &p.Location.Type, &p.Location.ID, &p.CompressionType, &p.GPUDirectRDMACapable, &p.Usage)
	d.Addr = cu.DevicePtr(addr)
	// Only the very name encodeDmaBuf writes: Sscanf alone takes spaces, signs, leading
	// zeros, numbers that wrap and anything after the last field.
	if err != nil || encodeDmaBuf(d) != name || !d.possible() {
		return DmaBuf{}, errNotDmaBuf
	}
	return d, nil
}

// possible reports whether ExportDmaBuf could have made d: the name comes from whatever
// process made the memfd, so a description it could not have written is refused rather
// than handed on (a negative device, no chunks, host memory).
func (d DmaBuf) possible() bool {
	return d.Size > 0 && d.Chunks >= 1 && d.Chunks <= math.MaxInt32 && d.Device >= 0 &&
		(d.Flags == 0 || d.Flags == uint64(cu.MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)) &&
		d.Props.Location.Type == cu.MEM_LOCATION_TYPE_DEVICE && int(d.Props.Location.ID) == d.Device
}

// dmaBufSeals are the seals of a dma-buf's memfd: its size, which tells the range's, and its
// seals cannot change.
const dmaBufSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// newDmaBufFD makes the descriptor of a dma-buf: a memfd of the range's size (sparse: it
// costs nothing), named after what it describes and sealed, so that neither can change.
func newDmaBufFD(d DmaBuf) (int, error) {
	fd, err := unix.MemfdCreate(encodeDmaBuf(d), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(d.Size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, dmaBufSeals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sealing the memfd: %w", err)
	}
	return fd, nil
}

func describeDmaBuf(fd int) (DmaBuf, error) {
	name, ok := memfdName(fd)
	if !ok {
		return DmaBuf{}, errNotDmaBuf
	}
	d, err := decodeDmaBuf(name)
	if err != nil {
		return DmaBuf{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return DmaBuf{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) != d.Size {
		return DmaBuf{}, errNotDmaBuf
	}
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil || seals != dmaBufSeals {
		return DmaBuf{}, errNotDmaBuf
	}
	return d, nil
}
