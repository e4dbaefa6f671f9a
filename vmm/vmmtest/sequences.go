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

// sequence replays a recorded sequence: each call is a case named group/name, and its
// janitor undoes what the calls made.
type sequence struct {
	*janitor
	c     *checker
	group string
	live  []func() // the releases of what create made, for releaseAll
}

func (e *env) sequence(t *testing.T, group string) *sequence {
	return &sequence{janitor: newJanitor(t, e.b), c: e.c, group: group}
}

func (s *sequence) check(name string, err error) {
	s.t.Helper()
	s.c.check(s.t, s.group+"/"+name, err)
}

func (s *sequence) checkValue(name string, err error, value string) {
	s.t.Helper()
	s.c.checkValue(s.t, s.group+"/"+name, err, value)
}

func (s *sequence) observe(name, fact string) {
	s.t.Helper()
	s.c.observe(s.t, s.group+"/"+name, fact, nil)
}

// mapping maps h as the case map-name; the janitor unmaps what was mapped.
func (s *sequence) mapping(name string, ptr cu.DevicePtr, size, off uint64, h cu.MemHandle, flags uint64) {
	s.t.Helper()
	s.check("map-"+name, s.mapAt(ptr, size, off, h, flags))
}

func (s *sequence) unmap(name string, ptr cu.DevicePtr, size uint64) {
	s.t.Helper()
	s.check("unmap-"+name, s.b.Unmap(ptr, size))
}

func (s *sequence) free(name string, va cu.DevicePtr, size uint64) {
	s.t.Helper()
	s.check("free-"+name, s.b.Free(va, size))
}

func (s *sequence) getAccess(name string, loc cu.MemLocation, ptr cu.DevicePtr) {
	s.t.Helper()
	f, err := s.b.GetAccess(loc, ptr)
	s.checkValue("get-access-"+name, err, fmt.Sprintf("%d", f))
}

func (s *sequence) setAccess(name string, ptr cu.DevicePtr, size uint64, d []cu.MemAccessDesc) {
	s.t.Helper()
	s.check("set-access-"+name, s.b.SetAccess(ptr, size, d))
}

// addressRange records the range ptr lies in, its base as an offset from reservation ref.
func (s *sequence) addressRange(name string, ptr cu.DevicePtr, refName string, ref cu.DevicePtr) {
	s.t.Helper()
	base, size, err := s.b.AddressRange(ptr)
	s.checkValue("address-range-"+name, err, fmt.Sprintf("base=%s size=%d", offset(refName, ref, base), size))
}

// create creates an allocation as the case create-name, and records its properties as a
// second case ("as requested", or what the backend reports instead). releaseAll releases
// what it made, in order, each release a case of its own.
func (s *sequence) create(name string, size uint64, p cu.MemAllocationProp, flags uint64) cu.MemHandle {
	s.t.Helper()
	h, err := s.adopt(s.b.Create(size, &p, flags))
	s.check("create-"+name, err)
	if err != nil {
		return 0
	}
	got, err := s.b.Properties(h)
	switch {
	case err != nil:
		s.check("create-"+name+"-properties", err)
	case got == p:
		s.observe("create-"+name+"-properties", "as requested")
	default:
		s.observe("create-"+name+"-properties", propString(got))
	}
	s.live = append(s.live, func() {
		s.t.Helper()
		s.check("release-"+name, s.b.Release(h))
	})
	return h
}

// releaseNow releases at once a handle a call made, and returns the call's error.
func (s *sequence) releaseNow(h cu.MemHandle, err error) error {
	if err == nil {
		_ = s.b.Release(h)
	}
	return err
}

func (s *sequence) releaseAll() {
	s.t.Helper()
	for _, release := range s.live {
		release()
	}
	s.live = nil
}
