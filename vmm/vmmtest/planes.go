package vmmtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// testPlanes records the calls vmm/kv makes: a page index committed across several planes
// (reservations), in each a run of pages created and mapped one by one, given access by one
// call over the run, their handles released at once (the mappings hold the memory); a
// finished slot's pages kept mapped and read by the next request as they were left (the
// driver zeroes nothing); a trim that unmaps a run of several mappings with one call; and a
// page unmapped from the middle of a run given a fresh allocation.
func testPlanes(t *testing.T, e *env) {
	j := newJanitor(t, e.b)
	const planes, run = 4, 8
	g := e.g
	bases := make([]cu.DevicePtr, planes)
	for p := range bases {
		bases[p] = j.mustReserve(run * g)
	}
	var mapErr, accessErr, releaseErr error
	for _, base := range bases {
		hs := make([]cu.MemHandle, run)
		for i := range hs {
			h, err := e.b.Create(g, e.prop(0), 0)
			noError(t, err)
			hs[i] = h
			keepFirst(&mapErr, j.mapAt(base+cu.DevicePtr(uint64(i)*g), g, 0, h, 0))
		}
		keepFirst(&accessErr, e.b.SetAccess(base, run*g, rw(0)))
		for _, h := range hs {
			keepFirst(&releaseErr, e.b.Release(h))
		}
	}
	e.c.check(t, "planes/map-a-run-page-by-page", mapErr)
	e.c.check(t, "planes/one-set-access-over-the-run", accessErr)
	e.c.check(t, "planes/release-handles-of-mapped-pages", releaseErr)
	if mapErr != nil || accessErr != nil {
		return
	}
	page := func(p, i int) cu.DevicePtr { return bases[p] + cu.DevicePtr(uint64(i)*g) }
	// Every page of every plane holds what was written to it, after its handle went.
	var writeErr error
	for p := range bases {
		for i := range run {
			keepFirst(&writeErr, e.b.CopyHtoD(0, page(p, i), Pattern(byte(p*run+i), int(g))))
		}
	}
	e.c.observe(t, "planes/pages-after-release-read-back", readBack(e, bases, run, g, nil), writeErr)
	// The next request of the slot: nothing unmapped or zeroed in between.
	e.c.observe(t, "planes/next-request-reads-the-last-bytes", readBack(e, bases, run, g, nil), nil)
	// Page 3 of plane 0 unmapped alone out of the run, a fresh page mapped there with its
	// own access; the pages around it keep theirs.
	mid := page(0, 3)
	e.c.check(t, "planes/unmap-a-page-inside-the-run", e.b.Unmap(mid, g))
	h, err := e.b.Create(g, e.prop(0), 0)
	noError(t, err)
	e.c.check(t, "planes/map-a-fresh-page-inside-the-run", j.mapAt(mid, g, 0, h, 0))
	e.c.check(t, "planes/set-access-of-the-fresh-page", e.b.SetAccess(mid, g, rw(0)))
	noError(t, e.b.Release(h))
	fresh := j.mustWrite(mid, 0xfe, int(g))
	e.c.observe(t, "planes/run-with-a-fresh-page-reads-back", readBack(e, bases, run, g, map[cu.DevicePtr][]byte{mid: fresh}), nil)
	// A trim: one unmap per plane over the whole run of separate mappings.
	var unmapErr error
	for _, base := range bases {
		keepFirst(&unmapErr, e.b.Unmap(base, run*g))
	}
	e.c.check(t, "planes/one-unmap-over-a-run-of-mappings", unmapErr)
}

// keepFirst keeps in *first the first error of a run of calls.
func keepFirst(first *error, err error) {
	if *first == nil {
		*first = err
	}
}

// readBack reads every page of the planes and says "as written" or where it first differs
// from Pattern(plane*run+page) (or from over, for the pages it names).
func readBack(e *env, bases []cu.DevicePtr, run int, g uint64, over map[cu.DevicePtr][]byte) string {
	got := make([]byte, g)
	for p, base := range bases {
		for i := range run {
			va := base + cu.DevicePtr(uint64(i)*g)
			want, ok := over[va]
			if !ok {
				want = Pattern(byte(p*run+i), int(g))
			}
			if err := e.b.CopyDtoH(0, got, va); err != nil {
				return fmt.Sprintf("plane %d page %d: %s", p, i, resultName(err))
			}
			if !bytes.Equal(got, want) {
				return fmt.Sprintf("plane %d page %d differs", p, i)
			}
		}
	}
	return "as written"
}
