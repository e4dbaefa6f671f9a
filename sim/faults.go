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

// fault is one armed failure: the call that brings left to zero fails with res.
type fault struct {
	left int
	res  cu.Result
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

// FailNth arms a fault: the nth call of op from now (1 is the next one) fails with r and
// does nothing else, as when the driver refuses it. Several faults may be armed at once,
// for the same or different operations. With calls of op from several goroutines at once,
// which of them is the nth is whichever counts nth.
func (s *Sim) FailNth(op Op, n int, r cu.Result) error {
	switch {
	case op >= numOps:
		return fmt.Errorf("sim: FailNth(%v, %d, %v): unknown operation (see Ops)", op, n, r)
	case n < 1:
		return fmt.Errorf("sim: FailNth(%v, %d, %v): n must be at least 1", op, n, r)
	case r == cu.SUCCESS:
		return fmt.Errorf("sim: FailNth(%v, %d, %v): the result must be an error", op, n, r)
	}
	s.faultMu.Lock()
	s.faults[op] = append(s.faults[op], fault{left: n, res: r})
	s.armed.Add(1)
	s.faultMu.Unlock()
	return nil
}

// ClearFaults disarms every fault FailNth armed.
func (s *Sim) ClearFaults() {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	for i := range s.faults {
		s.faults[i] = nil
	}
	s.armed.Store(0)
}

// SetCapacity caps the physical memory cuMemCreate may allocate on device ordinal (the
// default is the device's TotalMem). Memory already allocated stays; later creates past the
// cap fail with CUDA_ERROR_OUT_OF_MEMORY. From then on the device's committed bytes are
// counted on one shared count, exactly, so creates and releases on it from many goroutines
// no longer scale with cores.
func (s *Sim) SetCapacity(ordinal int, bytes uint64) error {
	if ordinal < 0 || ordinal >= len(s.cfg.Devices) {
		return fmt.Errorf("sim: SetCapacity(%d, %d): no such device", ordinal, bytes)
	}
	s.devMem[ordinal].setLimit(bytes)
	return nil
}

// enter counts a call of o and returns the armed fault it triggers, if any. With no fault
// armed it writes only a striped counter.
func (s *Sim) enter(o Op) *failure {
	s.calls[o].add(1)
	return s.fault(o)
}

// fault returns the armed fault a call of o triggers, if any, without counting the call:
// the commonest calls count themselves under a lock they take anyway (see counts).
func (s *Sim) fault(o Op) *failure {
	if s.armed.Load() == 0 {
		return nil
	}
	return s.trigger(o)
}

func (s *Sim) trigger(o Op) *failure {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	fs := s.faults[o]
	var hit *failure
	for i := 0; i < len(fs); i++ {
		fs[i].left--
		if fs[i].left == 0 {
			if hit == nil {
				hit = fail(fs[i].res, "injected by FailNth")
			}
			fs = append(fs[:i], fs[i+1:]...)
			s.armed.Add(-1)
			i--
		}
	}
	s.faults[o] = fs
	return hit
}
