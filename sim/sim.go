package sim

import (
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
// Calls on different objects run in parallel, as the driver runs them: a reservation's
// mappings have their own lock, handles are spread over independently locked shards (a
// new handle in the shard of the goroutine that makes it), and counters and each device's
// committed memory are striped, so goroutines working on their own memory share no lock
// and mostly write no common cache line. Placing and freeing reservations, and operations
// on ranges that span reservations, take one lock (the address space's), as the driver
// serializes them too, and multicast calls another.
type Sim struct {
	cfg   Config
	id    uint64 // distinguishes Sims of one process in fabric tokens
	noVMM bool   // no device supports VMM

	va        vaSpace
	handles   [handleShards]handleShard
	nextBlock atomic.Uint64 // the next block of handle numbers a shard takes

	devMem   []budget // per device
	hostMem  budget
	mcs      counter
	bindings counter
	nextID   atomic.Uint64

	shareMu   sync.Mutex
	byFile    map[fileKey]*phys
	byFabric  map[cu.MemFabricHandle]*phys
	win32     map[uintptr]*phys
	nextWin32 uintptr

	calls   [numOps]counter
	faultMu sync.Mutex
	faults  [numOps][]fault
	armed   atomic.Int32
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
		devMem:    make([]budget, len(cfg.Devices)),
		byFile:    map[fileKey]*phys{},
		byFabric:  map[cu.MemFabricHandle]*phys{},
		win32:     map[uintptr]*phys{},
		nextWin32: 0x1000,
	}
	for i := range s.handles {
		s.handles[i].m = map[cu.MemHandle]*handle{}
	}
	s.hostMem.limit.Store(cfg.HostCapacity)
	s.noVMM = !slices.ContainsFunc(cfg.Devices, func(d Device) bool { return d.VMM })
	unit := uint64(0)
	for i, d := range cfg.Devices {
		s.devMem[i].limit.Store(d.TotalMem)
		if unit == 0 || d.Granularity < unit {
			unit = d.Granularity
		}
	}
	if unit == 0 {
		unit = 2 * mib
	}
	s.va.init(cfg.VABase, cfg.VASize&^(unit-1), unit)
	return s, nil
}

// Config returns a copy of the configuration the Sim was built from.
func (s *Sim) Config() Config { return s.cfg.clone() }

// Name returns "sim".
func (*Sim) Name() string { return "sim" }

// DriverVersion returns the configured driver version.
func (s *Sim) DriverVersion() (int, error) {
	if f := s.enter(OpDriverVersion); f != nil {
		return 0, f.wrap("cuDriverGetVersion", "")
	}
	return s.cfg.DriverVersion, nil
}

// DeviceCount returns the number of configured devices.
func (s *Sim) DeviceCount() (int, error) {
	if f := s.enter(OpDeviceCount); f != nil {
		return 0, f.wrap("cuDeviceGetCount", "")
	}
	return len(s.cfg.Devices), nil
}

// device checks an ordinal as cuDeviceGet does.
func (s *Sim) device(ordinal int) (*Device, *failure) {
	if ordinal < 0 || ordinal >= len(s.cfg.Devices) {
		return nil, fail(cu.ERROR_INVALID_DEVICE, "no such device")
	}
	return &s.cfg.Devices[ordinal], nil
}

// Device describes device ordinal.
func (s *Sim) Device(ordinal int) (vmm.DeviceInfo, error) {
	f := s.enter(OpDevice)
	var d *Device
	if f == nil {
		d, f = s.device(ordinal)
	}
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
	f := s.enter(OpAttribute)
	var d *Device
	if f == nil {
		d, f = s.device(ordinal)
	}
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
	f := s.enter(OpCanAccessPeer)
	if f == nil {
		_, f = s.device(ordinal)
	}
	if f == nil {
		_, f = s.device(peer)
	}
	if f != nil {
		return false, f.wrap("cuDeviceCanAccessPeer", "%d, %d", ordinal, peer)
	}
	return s.peer(ordinal, peer), nil
}

// P2PAttribute returns an attribute of the link from src to dst. Asking about a device and
// itself is CUDA_ERROR_INVALID_DEVICE (recorded: vmmtest sweep/p2p-attribute-1-self to -6-self).
func (s *Sim) P2PAttribute(a cu.P2PAttribute, src, dst int) (int, error) {
	f := s.enter(OpP2PAttribute)
	if f == nil {
		_, f = s.device(src)
	}
	if f == nil {
		_, f = s.device(dst)
	}
	if f == nil && src == dst {
		f = fail(cu.ERROR_INVALID_DEVICE, "a device and itself")
	}
	if f == nil && (a < cu.DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK || a > cu.DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED) {
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
