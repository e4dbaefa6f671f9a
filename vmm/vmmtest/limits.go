package vmmtest

import (
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// testLimits asks for sizes at the edges of what a 64-bit size can say: reservations and
// allocations far larger than the address space or any device, and maps, unmaps and access
// changes whose range runs past the end of the address space. A simulator must refuse them
// as the driver does, not wrap around or take them at their word.
func testLimits(t *testing.T, e *env) {
	j := newJanitor(t, e.b)
	sizes := []struct {
		name string
		size uint64
	}{{"1PiB", 1 << 50}, {"2^63", 1 << 63}, {"max", ^uint64(0) &^ (e.g - 1)}}
	for _, s := range sizes {
		e.c.check(t, "limits/reserve-"+s.name, errOf(j.reserve(s.size, 0)))
		e.c.check(t, "limits/create-"+s.name, errOf(j.create(s.size, e.prop(0))))
	}
	h := j.mustCreate(e.g, e.prop(0))
	va := j.mustReserve(e.g)
	e.c.check(t, "limits/map-size-2^63", e.b.Map(va, 1<<63, 0, h, 0))
	e.c.check(t, "limits/map-size-to-top", e.b.Map(va, -uint64(va), 0, h, 0))
	e.c.check(t, "limits/unmap-size-2^63", e.b.Unmap(va, 1<<63))
	e.c.check(t, "limits/unmap-size-to-top", e.b.Unmap(va, -uint64(va)))
	e.c.check(t, "limits/access-size-2^63", e.b.SetAccess(va, 1<<63, rw(0)))
	e.c.check(t, "limits/free-size-2^63", e.b.Free(va, 1<<63))

	if runtime.GOOS != "linux" || !e.posixFD() {
		return
	}
	// An imported allocation mapped with a size its exporter could claim: the driver tells
	// an importer no size, so the map is what checks it.
	p := e.prop(0)
	p.RequestedHandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	src := j.mustCreate(e.g, p)
	fd := j.mustExportFD(src)
	imp, err := j.adopt(e.b.ImportFD(fd))
	noError(t, err)
	big := j.mustReserve(4 * e.g)
	e.c.check(t, "limits/map-imported-claimed-larger", e.b.Map(big, 4*e.g, 0, imp, 0))
	e.c.check(t, "limits/map-imported-claimed-1PiB", e.b.Map(big, 1<<50, 0, imp, 0))
}
