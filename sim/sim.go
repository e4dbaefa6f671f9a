package sim

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Sim is a simulated CUDA driver: a vmm.Backend in pure Go. Create one with New; it is safe
// for concurrent use. Each Sim is a separate machine with its own address space and handles.
//
// One lock serializes the calls, as the driver serializes its VMM work: every method holds
// mu for the whole call, but copies and memset, which hold it to check their ranges and
// again to let go of the memory, not while they move the bytes.
type Sim struct {
	cfg   Config
	id    uint64 // distinguishes Sims of one process in fabric tokens
	noVMM bool   // no device supports VMM

	mu           sync.Mutex // guards everything below
	va           vaSpace
	handles      map[cu.MemHandle]*handle
	handleCount  uint64 // handles made, for the next value
	live         int    // handles with references
	devMem       []capacity
	hostMem      capacity
	mcs          int // live multicast objects
	bindings     int // live multicast bindings
	nextID       uint64
	byFile       map[fileKey]*phys
	byFabric     map[cu.MemFabricHandle]*phys
	win32        map[uintptr]*phys
	nextWin32    uintptr
	calls        [numOps]uint64
	faults       [numOps][]fault
	spareHandles spares[handle]
	sparePhys    spares[phys]
}

// capacity is the physical memory of a device or of the host: what is committed, against a
// limit (0: none, unless SetCapacity capped it there).
type capacity struct {
	committed, limit uint64
	capped           bool
}

var _ vmm.Backend = (*Sim)(nil)

var simIDs atomic.Uint64

// New returns a simulator of the machine cfg describes. cfg is copied: changing it later
// does not affect the Sim. New fails as cuInit does with Config.FabricManagerDown.
func New(cfg Config) (*Sim, error) {
	cfg = cfg.clone()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.FabricManagerDown {
		return nil, &Error{Op: "cuInit", Args: "0", Err: cu.ERROR_SYSTEM_NOT_READY,
			Reason: "the GPUs' NVLinks go through NVSwitches of this host and nvidia-fabricmanager is not running"}
	}
	s := &Sim{
		cfg:       cfg,
		id:        simIDs.Add(1),
		handles:   map[cu.MemHandle]*handle{},
		devMem:    make([]capacity, len(cfg.Devices)),
		hostMem:   capacity{limit: cfg.HostCapacity},
		byFile:    map[fileKey]*phys{},
		byFabric:  map[cu.MemFabricHandle]*phys{},
		win32:     map[uintptr]*phys{},
		nextWin32: 0x1000,
	}
	s.noVMM = !slices.ContainsFunc(cfg.Devices, func(d Device) bool { return d.VMM })
	unit := uint64(0)
	for i, d := range cfg.Devices {
		s.devMem[i].limit = d.TotalMem
		if unit == 0 || d.Granularity < unit {
			unit = d.Granularity
		}
	}
	unit = cmp.Or(unit, 2*mib)
	s.va.init(cfg.VABase, cfg.VASize&^(unit-1), unit)
	return s, nil
}

// Config returns a copy of the configuration the Sim was built from.
func (s *Sim) Config() Config { return s.cfg.clone() }

// Name returns "sim".
func (*Sim) Name() string { return "sim" }

// DriverVersion returns the configured driver version.
func (s *Sim) DriverVersion() (int, error) {
	if f := s.do(OpDriverVersion, func() *failure { return nil }); f != nil {
		return 0, f.wrap("cuDriverGetVersion", "")
	}
	return s.cfg.DriverVersion, nil
}

// DeviceCount returns the number of configured devices.
func (s *Sim) DeviceCount() (int, error) {
	if f := s.do(OpDeviceCount, func() *failure { return nil }); f != nil {
		return 0, f.wrap("cuDeviceGetCount", "")
	}
	return len(s.cfg.Devices), nil
}

// locked runs one call of o under s.mu: it counts the call, and fails it with a fault
// FailNth armed before fn runs.
func locked[T any](s *Sim, o Op, fn func() (T, *failure)) (v T, f *failure) {
	s.mu.Lock()
	defer s.mu.Unlock() // a panic must not leave the Sim locked for good
	if f = s.enter(o); f == nil {
		v, f = fn()
	}
	return v, f
}

// do is locked for a call that returns nothing but its failure.
func (s *Sim) do(o Op, fn func() *failure) (f *failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f = s.enter(o); f == nil {
		f = fn()
	}
	return f
}

// device checks an ordinal as cuDeviceGet does.
func (s *Sim) device(ordinal int) (*Device, *failure) {
	if ordinal < 0 || ordinal >= len(s.cfg.Devices) {
		return nil, fail(cu.ERROR_INVALID_DEVICE, "no such device")
	}
	return &s.cfg.Devices[ordinal], nil
}

// enterDevice counts a call of o and checks its device ordinal: the start of every call
// that names a device.
func (s *Sim) enterDevice(o Op, ordinal int) (*Device, *failure) {
	return locked(s, o, func() (*Device, *failure) { return s.device(ordinal) })
}

// Device describes device ordinal.
func (s *Sim) Device(ordinal int) (vmm.DeviceInfo, error) {
	d, f := s.enterDevice(OpDevice, ordinal)
	if f != nil {
		return vmm.DeviceInfo{}, f.wrap("cuDeviceGet", "%d", ordinal)
	}
	return vmm.DeviceInfo{
		Ordinal: ordinal, Name: d.Name, UUID: d.UUID, PCIBusID: d.PCIBusID, TotalMem: d.TotalMem,
		ComputeMajor: d.ComputeMajor, ComputeMinor: d.ComputeMinor,
	}, nil
}

// knownAttribute reports whether the driver knows a: cu's generated table is the header's.
func knownAttribute(a cu.DeviceAttribute) bool {
	return !strings.HasPrefix(a.String(), "CUdevice_attribute(")
}

// Attribute returns a device attribute.
func (s *Sim) Attribute(ordinal int, a cu.DeviceAttribute) (int, error) {
	d, f := s.enterDevice(OpAttribute, ordinal)
	if f == nil && !knownAttribute(a) {
		f = fail(cu.ERROR_INVALID_VALUE, "unknown attribute")
	}
	if f != nil {
		return 0, f.wrap("cuDeviceGetAttribute", "%v, device %d", a, ordinal)
	}
	return d.attribute(a), nil
}

// peer reports whether device a can access memory of device b.
func (s *Sim) peer(a, b int) bool {
	if a == b {
		return false
	}
	if s.cfg.PeerAccess == nil {
		return true
	}
	return s.cfg.PeerAccess[a][b]
}

// canAccess reports whether device d may be given access to memory owned by owner (-1:
// host memory, which every device reaches).
func (s *Sim) canAccess(d, owner int) bool {
	return owner < 0 || d == owner || owner >= len(s.cfg.Devices) || s.peer(d, owner)
}

// CanAccessPeer reports whether device ordinal can access memory of peer; a device never
// reports access to itself, as the driver does.
func (s *Sim) CanAccessPeer(ordinal, peer int) (bool, error) {
	_, f := s.enterDevice(OpCanAccessPeer, ordinal)
	if f == nil {
		_, f = s.device(peer)
	}
	if f != nil {
		return false, f.wrap("cuDeviceCanAccessPeer", "%d, %d", ordinal, peer)
	}
	return s.peer(ordinal, peer), nil
}

// P2PAttribute returns an attribute of the link from src to dst.
func (s *Sim) P2PAttribute(a cu.P2PAttribute, src, dst int) (int, error) {
	_, f := s.enterDevice(OpP2PAttribute, src)
	switch {
	case f != nil:
	case dst < 0 || dst >= len(s.cfg.Devices):
		f = fail(cu.ERROR_INVALID_DEVICE, "no such device")
	case src == dst:
		f = fail(cu.ERROR_INVALID_DEVICE, "a device and itself") // recorded: vmmtest sweep/p2p-attribute-1-self to -6-self
	case a < cu.DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK || a > cu.DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
		f = fail(cu.ERROR_INVALID_VALUE, "unknown P2P attribute")
	}
	if f != nil {
		return 0, f.wrap("cuDeviceGetP2PAttribute", "%d, %d -> %d", a, src, dst)
	}
	if !s.peer(src, dst) {
		return 0, nil
	}
	switch a {
	case cu.DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, cu.DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
		cu.DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
		return 1, nil
	}
	return 0, nil
}
