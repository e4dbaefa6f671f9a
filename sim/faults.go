package sim

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
)

// Op is a vmm.Backend method, for fault injection (FailNth) and call counting (Stats.Calls,
// keyed by Op.String).
type Op uint8

// The operations: one per vmm.Backend method but Name.
const (
	OpDriverVersion Op = iota
	OpDeviceCount
	OpDevice
	OpAttribute
	OpCanAccessPeer
	OpP2PAttribute
	OpGranularity
	OpCreate
	OpRelease
	OpRetain
	OpProperties
	OpReserve
	OpFree
	OpMap
	OpUnmap
	OpSetAccess
	OpGetAccess
	OpAddressRange
	OpExportFD
	OpImportFD
	OpExportFabric
	OpImportFabric
	OpExportWin32
	OpImportWin32
	OpExportDmaBuf
	OpMulticastGranularity
	OpMulticastCreate
	OpMulticastAddDevice
	OpMulticastBindMem
	OpMulticastBindAddr
	OpMulticastUnbind
	OpMulticastBindMemV2
	OpMulticastBindAddrV2
	OpPointerAttributes
	OpCopyHtoD
	OpCopyDtoH
	OpCopyDtoD
	OpMemsetD8
	numOps
)

// opNames are the method names, by Op. ops_test.go checks them against vmm.Backend's
// methods, and that each method counts and fails as its own Op.
var opNames = [numOps]string{
	"DriverVersion", "DeviceCount", "Device", "Attribute", "CanAccessPeer", "P2PAttribute",
	"Granularity", "Create", "Release", "Retain", "Properties", "Reserve", "Free", "Map", "Unmap",
	"SetAccess", "GetAccess", "AddressRange", "ExportFD", "ImportFD", "ExportFabric",
	"ImportFabric", "ExportWin32", "ImportWin32", "ExportDmaBuf", "MulticastGranularity", "MulticastCreate",
	"MulticastAddDevice", "MulticastBindMem", "MulticastBindAddr", "MulticastUnbind",
	"MulticastBindMemV2", "MulticastBindAddrV2", "PointerAttributes", "CopyHtoD", "CopyDtoH", "CopyDtoD", "MemsetD8",
}

// String is the vmm.Backend method name.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Ops returns every operation, in the order of the constants.
func Ops() []Op {
	ops := make([]Op, numOps)
	for i := range ops {
		ops[i] = Op(i)
	}
	return ops
}

// fault is one armed failure: the call that brings left to zero fails with res.
type fault struct {
	left int
	res  cu.Result
}

// FailNth arms a fault: the nth call of op from now (1 is the next one) fails with r and
// does nothing else, as when the driver refuses it. Several faults may be armed at once,
// for the same or different operations. With calls of op from several goroutines at once,
// the nth is whichever takes the Sim's lock nth.
func (s *Sim) FailNth(op Op, n int, r cu.Result) error {
	switch {
	case op >= numOps:
		return fmt.Errorf("sim: FailNth(%v, %d, %v): unknown operation (see Ops)", op, n, r)
	case n < 1:
		return fmt.Errorf("sim: FailNth(%v, %d, %v): n must be at least 1", op, n, r)
	case r == cu.SUCCESS:
		return fmt.Errorf("sim: FailNth(%v, %d, %v): the result must be an error", op, n, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], fault{left: n, res: r})
	return nil
}

// ClearFaults disarms every fault FailNth armed.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = [numOps][]fault{}
}

// SetCapacity caps the physical memory cuMemCreate may allocate on device ordinal (the
// default is the device's TotalMem) at bytes, 0 included. Memory already allocated stays;
// later creates past the cap fail with CUDA_ERROR_OUT_OF_MEMORY.
func (s *Sim) SetCapacity(ordinal int, bytes uint64) error {
	if ordinal < 0 || ordinal >= len(s.cfg.Devices) {
		return fmt.Errorf("sim: SetCapacity(%d, %d): no such device", ordinal, bytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devMem[ordinal].limit, s.devMem[ordinal].capped = bytes, true
	return nil
}

// needVMM are the operations a machine without VMM refuses before looking at their
// arguments. Granularity, Create, SetAccess and ImportWin32 refuse it too, but after the
// checks package cu makes in Go (s.vmm in their bodies).
var needVMM = [numOps]bool{OpRetain: true, OpReserve: true, OpFree: true, OpMap: true, OpUnmap: true,
	OpGetAccess: true, OpImportFD: true, OpImportFabric: true, OpExportDmaBuf: true}

// enter counts a call of o and returns the armed fault it triggers, if any, or the refusal
// of a machine without VMM of an operation of needVMM. The caller holds s.mu.
func (s *Sim) enter(o Op) *failure {
	if s.handles == nil {
		return fail(cu.ERROR_NOT_INITIALIZED, "a zero Sim: make one with New")
	}
	s.calls[o]++
	fs := s.faults[o]
	var hit *failure
	for i := 0; i < len(fs); i++ {
		if fs[i].left--; fs[i].left == 0 {
			if hit == nil {
				hit = fail(fs[i].res, "injected by FailNth")
			}
			fs = append(fs[:i], fs[i+1:]...)
			i--
		}
	}
	s.faults[o] = fs
	if hit == nil && needVMM[o] {
		return s.vmm()
	}
	return hit
}

// MemInfo is cuMemGetInfo: device ordinal's capacity and what of it no allocation holds.
func (s *Sim) MemInfo(ordinal int) (free, total uint64, err error) {
	if ordinal < 0 || ordinal >= len(s.cfg.Devices) {
		return 0, 0, fail(cu.ERROR_INVALID_DEVICE, "no such device").wrap("cuMemGetInfo", "device %d", ordinal)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.devMem[ordinal]
	return c.limit - min(c.committed, c.limit), c.limit, nil
}
