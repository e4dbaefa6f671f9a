package vmmtest

import (
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// The sweep/, walk/, faults/ and edges/ cases replay call sequences first recorded one line
// per call on an H100 and an H200 (driver 580, CUDA 13.0), each in a process of its own. Their
// sizes are those of the recordings, in MiB of a device whose granularity is 2 MiB; on a
// device with another granularity they would ask other questions, so they are skipped there.

const mib = 1 << 20

// needRecordedGranularity skips a sequence whose sizes assume the recorded 2 MiB granularity.
func needRecordedGranularity(t *testing.T, e *env) {
	if e.g != 2*mib {
		t.Skipf("the recorded sequence assumes a 2 MiB granularity; device 0's is %s", sizeName(e.g))
	}
}

func devLoc(id int) cu.MemLocation {
	return cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: int32(id)}
}

func access(loc cu.MemLocation, f cu.MemAccessFlags) []cu.MemAccessDesc {
	return []cu.MemAccessDesc{{Location: loc, Flags: f}}
}

// propString formats p field by field, as the recordings give allocation properties.
func propString(p cu.MemAllocationProp) string {
	return fmt.Sprintf("{Type:%d RequestedHandleTypes:%d Location:{Type:%d ID:%d} Win32HandleMetaData:%d CompressionType:%d GPUDirectRDMACapable:%d Usage:%d Reserved:%v}",
		p.Type, p.RequestedHandleTypes, p.Location.Type, p.Location.ID, p.Win32HandleMetaData, p.CompressionType, p.GPUDirectRDMACapable, p.Usage, p.Reserved)
}

// placed says whether a reservation is aligned to the granularity: the rule. Where else it
// lands, and whether a hint was honoured, depends on what the process reserved before (an
// H200 placed the same 64 KiB and 64 TiB reservations differently from one run of the
// suite to the next): the placement/ cases record that in a controlled setting.
func placed(va cu.DevicePtr) string {
	return fmt.Sprintf("align2M=%v", va%(2*mib) == 0)
}

// offset names a pointer by its distance from a named reservation: "A+8388608".
func offset(name string, base, ptr cu.DevicePtr) string {
	return fmt.Sprintf("%s%+d", name, int64(ptr)-int64(base))
}

// creator creates allocations as the sequences do: each result is a case, and the properties
// of what was created are a second one ("as requested", or what the backend reports instead).
// Created allocations are released later, in order, each release a case of its own.
type creator struct {
	e     *env
	j     *janitor
	group string
	live  []struct {
		name string
		h    cu.MemHandle
	}
}

func (c *creator) create(t *testing.T, name string, size uint64, p cu.MemAllocationProp, flags uint64) cu.MemHandle {
	t.Helper()
	h, err := c.e.b.Create(size, &p, flags)
	c.e.c.check(t, c.group+"/create-"+name, err)
	if err != nil {
		return 0
	}
	c.j.adopt(h)
	got, err := c.e.b.Properties(h)
	switch {
	case err != nil:
		c.e.c.check(t, c.group+"/create-"+name+"-properties", err)
	case got == p:
		c.e.c.observe(t, c.group+"/create-"+name+"-properties", "as requested", nil)
	default:
		c.e.c.observe(t, c.group+"/create-"+name+"-properties", propString(got), nil)
	}
	c.live = append(c.live, struct {
		name string
		h    cu.MemHandle
	}{name, h})
	return h
}

// releaseAll releases what create made, in order, each a case.
func (c *creator) releaseAll(t *testing.T) {
	t.Helper()
	for _, l := range c.live {
		c.e.c.check(t, c.group+"/release-"+l.name, c.e.b.Release(l.h))
	}
	c.live = nil
}
