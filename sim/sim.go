package sim

import (
	"strings"
	"sync"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Sim is a simulated CUDA driver: a vmm.Backend in pure Go. Create one with New; it is safe
// for concurrent use. Each Sim is a separate machine with its own address space and handles.
type Sim struct {
	cfg Config
	id  uint64 // distinguishes Sims of one process in fabric tokens

	// mu serializes every call: the driver's own calls are effectively serialized per
	// process for VMM bookkeeping, and one lock keeps the simulator deterministic.
	mu sync.Mutex

	as            addrSpace
	handles       map[cu.MemHandle]*handle
	nextHandle    uint64
	liveHandles   int
	allocs, mcs   int
	bindings      int
	nextID        uint64
	committed     []uint64
	capacity      []uint64
	hostCommitted uint64
	byFile        map[fileKey]*phys
	byFabric      map[cu.MemFabricHandle]*phys
	win32         map[uintptr]*phys
	nextWin32     uintptr

	calls  [numOps]uint64
	faults [numOps][]fault
	armed  int
}

var _ vmm.Backend = (*Sim)(nil)

var simIDs struct {
	sync.Mutex
	n uint64
}

// New returns a simulator of the machine cfg describes. cfg is copied: changing it later
// does not affect the Sim.
func New(cfg Config) (*Sim, error) {
	cfg = cfg.clone()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	simIDs.Lock()
	simIDs.n++
	id := simIDs.n
	simIDs.Unlock()
	s := &Sim{
		cfg:        cfg,
		id:         id,
		handles:    map[cu.MemHandle]*handle{},
		nextHandle: 0x5000000000, // handle values look like the driver's pointers, never small integers
		committed:  make([]uint64, len(cfg.Devices)),
		capacity:   make([]uint64, len(cfg.Devices)),
		byFile:     map[fileKey]*phys{},
		byFabric:   map[cu.MemFabricHandle]*phys{},
		win32:      map[uintptr]*phys{},
		nextWin32:  0x1000,
	}
	unit := uint64(0)
	for i, d := range cfg.Devices {
		s.capacity[i] = d.TotalMem
		if unit == 0 || d.Granularity < unit {
			unit = d.Granularity
		}
	}
	if unit == 0 {
		unit = 2 * mib
	}
	s.as.init(cfg.VABase, cfg.VASize&^(unit-1), unit)
	return s, nil
}

// Config returns a copy of the configuration the Sim was built from.
func (s *Sim) Config() Config { return s.cfg.clone() }

// Name returns "sim".
func (*Sim) Name() string { return "sim" }

// DriverVersion returns the configured driver version.
func (s *Sim) DriverVersion() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.enter(opDriverVersion); f != nil {
		return 0, f.wrap("cuDriverGetVersion", "")
	}
	return s.cfg.DriverVersion, nil
}

// DeviceCount returns the number of configured devices.
func (s *Sim) DeviceCount() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.enter(opDeviceCount); f != nil {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opDevice)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opAttribute)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opCanAccessPeer)
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
// itself is CUDA_ERROR_INVALID_DEVICE, as recorded.
func (s *Sim) P2PAttribute(a cu.P2PAttribute, src, dst int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.enter(opP2PAttribute)
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
