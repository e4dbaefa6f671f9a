package sim

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
)

// op numbers the Backend methods, for call counting and fault injection.
type op uint8

const (
	opDriverVersion op = iota
	opDeviceCount
	opDevice
	opAttribute
	opCanAccessPeer
	opP2PAttribute
	opGranularity
	opCreate
	opRelease
	opRetain
	opProperties
	opReserve
	opFree
	opMap
	opUnmap
	opSetAccess
	opGetAccess
	opAddressRange
	opExportFD
	opImportFD
	opExportFabric
	opImportFabric
	opExportWin32
	opImportWin32
	opExportDmaBuf
	opMulticastGranularity
	opMulticastCreate
	opMulticastAddDevice
	opMulticastBindMem
	opMulticastBindAddr
	opMulticastUnbind
	opMulticastBindMemV2
	opMulticastBindAddrV2
	opPointerAttributes
	opCopyHtoD
	opCopyDtoH
	opCopyDtoD
	opMemsetD8
	numOps
)

// opNames are the Backend method names FailNth and Stats.Calls use. ops_test.go checks them
// against vmm.Backend's methods, and that each method counts and fails under its own name.
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

// Ops returns the operation names FailNth accepts: the vmm.Backend method names.
func Ops() []string { return append([]string(nil), opNames[:]...) }

// FailNth arms a fault: the nth call of op from now (1 is the next one) fails with r and
// does nothing else, as when the driver refuses it. op is a vmm.Backend method name
// ("Create", "Map", "CopyHtoD", ...). Several faults may be armed at once, for the same or
// different operations. With calls of op from several goroutines at once, which of them is
// the nth is whichever counts nth.
func (s *Sim) FailNth(op string, n int, r cu.Result) error {
	if n < 1 {
		return fmt.Errorf("sim: FailNth(%q, %d, %v): n must be at least 1", op, n, r)
	}
	if r == cu.SUCCESS {
		return fmt.Errorf("sim: FailNth(%q, %d, %v): the result must be an error", op, n, r)
	}
	for i, name := range opNames {
		if name == op {
			s.faultMu.Lock()
			s.faults[i] = append(s.faults[i], fault{left: n, res: r})
			s.armed.Add(1)
			s.faultMu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("sim: FailNth(%q, %d, %v): unknown operation (see Ops)", op, n, r)
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
func (s *Sim) enter(o op) *failure {
	s.calls[o].add(1)
	return s.fault(o)
}

// fault returns the armed fault a call of o triggers, if any, without counting the call:
// the commonest calls count themselves under a lock they take anyway (see counts).
func (s *Sim) fault(o op) *failure {
	if s.armed.Load() == 0 {
		return nil
	}
	return s.trigger(o)
}

func (s *Sim) trigger(o op) *failure {
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
