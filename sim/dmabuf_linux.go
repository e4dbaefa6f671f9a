package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
	"golang.org/x/sys/unix"
)

// dmaBufName prefixes the name of the memfd of a dma-buf sim exported; the rest describes it.
const dmaBufName = "cuvmm-sim.dmabuf:"

// dmaBufFields are the fields of the name, in order: address (hex), size, device, chunks,
// flags, and the allocation properties (type, handle types, location type, location id,
// compression, GPUDirect RDMA, usage, colon-separated).
var dmaBufFields = []string{"a", "s", "d", "n", "f", "p"}

func encodeDmaBuf(d DmaBuf) string {
	p := d.Props
	return fmt.Sprintf("%sa=%x,s=%d,d=%d,n=%d,f=%d,p=%d:%d:%d:%d:%d:%d:%d", dmaBufName,
		uint64(d.Addr), d.Size, d.Device, d.Chunks, d.Flags,
		p.Type, p.RequestedHandleTypes, p.Location.Type, p.Location.ID, p.CompressionType, p.GPUDirectRDMACapable, p.Usage)
}

var errNotDmaBuf = errors.New("not a dma-buf sim exported")

func decodeDmaBuf(name string) (DmaBuf, error) {
	rest, ok := strings.CutPrefix(name, dmaBufName)
	if !ok {
		return DmaBuf{}, errNotDmaBuf
	}
	parts := strings.Split(rest, ",")
	if len(parts) != len(dmaBufFields) {
		return DmaBuf{}, errNotDmaBuf
	}
	vals := make([]string, len(parts))
	for i, kv := range parts {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != dmaBufFields[i] {
			return DmaBuf{}, errNotDmaBuf
		}
		vals[i] = v
	}
	var d DmaBuf
	var errs []error
	num := func(s string, bits int) int64 {
		v, err := strconv.ParseInt(s, 10, bits)
		errs = append(errs, err)
		return v
	}
	unum := func(s string, base, bits int) uint64 {
		v, err := strconv.ParseUint(s, base, bits)
		errs = append(errs, err)
		return v
	}
	d.Addr = cu.DevicePtr(unum(vals[0], 16, 64))
	d.Size = unum(vals[1], 10, 64)
	d.Device = int(num(vals[2], 32))
	d.Chunks = int(num(vals[3], 32))
	d.Flags = unum(vals[4], 10, 64)
	props := strings.Split(vals[5], ":")
	if len(props) != 7 {
		return DmaBuf{}, errNotDmaBuf
	}
	d.Props.Type = cu.MemAllocationType(num(props[0], 32))
	d.Props.RequestedHandleTypes = cu.MemHandleType(num(props[1], 32))
	d.Props.Location.Type = cu.MemLocationType(num(props[2], 32))
	d.Props.Location.ID = int32(num(props[3], 32))
	d.Props.CompressionType = uint8(unum(props[4], 10, 8))
	d.Props.GPUDirectRDMACapable = uint8(unum(props[5], 10, 8))
	d.Props.Usage = uint16(unum(props[6], 10, 16))
	if errors.Join(errs...) != nil || !d.possible() {
		return DmaBuf{}, errNotDmaBuf
	}
	return d, nil
}

// possible reports whether ExportDmaBuf could have made d: the name comes from whatever
// process made the memfd, so a description it could not have written is refused rather
// than handed on (a negative device, no chunks, host memory).
func (d DmaBuf) possible() bool {
	return d.Size > 0 && d.Chunks >= 1 && d.Device >= 0 &&
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
