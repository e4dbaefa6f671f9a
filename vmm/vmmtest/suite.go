package vmmtest

import (
	"os"
	"runtime"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/vmm"
)

// Capabilities declares what the machine behind a backend can do that another may not. A
// case needing a capability that is not declared is skipped, never guessed.
type Capabilities struct {
	// Multicast exercises multicast objects. Never set it on shared multi-GPU machines: a
	// multicast object can put their GPUs out of service for everyone.
	Multicast bool
	// Fabric says an IMEX channel is present, so fabric handles can be created and shared.
	// Without it the suite checks that creating one is refused.
	Fabric bool
	// CrossProcess runs the case that sends an exported file descriptor to a child process
	// (Linux only; the test binary must call RunChildIfRequested from TestMain).
	CrossProcess bool
	// Dangerous runs the cases that make the device fault (a copy into memory the device
	// may only read). On a real GPU they can leave the context unusable, so they run last.
	Dangerous bool
	// Deviations declares, by case name, the results where this backend knowingly differs
	// from the recorded driver, with why. Each is checked: the case must have a recorded
	// result other than the declared one, the backend must return exactly the declared one,
	// and a group that runs must reach it. A real driver declares none.
	Deviations map[string]Deviation
}

// NewBackend opens a fresh backend for one test.
type NewBackend func(t testing.TB) vmm.Backend

// LiveCounter is implemented by backends that can count the handles they hold, so that the
// suite can prove it leaked none.
type LiveCounter interface {
	// LiveHandles is the number of allocation handles the backend holds: created, imported
	// or retained, and not yet released.
	LiveHandles() int
}

// env is what every case gets.
type env struct {
	b    vmm.Backend
	c    *checker
	caps Capabilities
	ndev int
	g    uint64 // minimum granularity of device 0
	gRec uint64 // recommended granularity of device 0
}

// prop is pinned memory on device dev.
func (e *env) prop(dev int) *cu.MemAllocationProp {
	return &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: devLoc(dev)}
}

func devLoc(dev int) cu.MemLocation {
	return cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE, ID: int32(dev)}
}

func access(loc cu.MemLocation, f cu.MemAccessFlags) []cu.MemAccessDesc {
	return []cu.MemAccessDesc{{Location: loc, Flags: f}}
}

func rw(dev int) []cu.MemAccessDesc { return access(devLoc(dev), cu.MEM_ACCESS_FLAGS_PROT_READWRITE) }

// Run drives the backend newBackend makes through the whole API. newBackend is called once.
func Run(t *testing.T, newBackend NewBackend, caps Capabilities) {
	exp, err := Recorded()
	noError(t, err)
	recordPath := os.Getenv(EnvRecord)
	c := &checker{exp: exp, record: recordPath != "", seen: map[string]string{}}
	if !c.record {
		c.dev = caps.Deviations
		checkDeviations(t, exp, caps.Deviations)
	}

	b := newBackend(t)
	n, err := b.DeviceCount()
	noError(t, err)
	skipIf(t, n == 0, "vmmtest: backend has no device")
	info, err := b.Device(0)
	noError(t, err)
	if ok, err := b.Attribute(0, cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED); err != nil || ok == 0 {
		t.Skipf("vmmtest: device 0 (%s) has no VMM support (%d, %v)", info.Name, ok, err)
	}
	e := &env{b: b, c: c, caps: caps, ndev: n}
	e.g, err = b.Granularity(e.prop(0), cu.MEM_ALLOC_GRANULARITY_MINIMUM)
	noError(t, err)
	e.gRec, err = b.Granularity(e.prop(0), cu.MEM_ALLOC_GRANULARITY_RECOMMENDED)
	noError(t, err)
	driver, _ := b.DriverVersion()
	t.Logf("vmmtest: backend %s, driver %d, %d device(s), device 0 %s, granularity %d/%d, caps %+v, record=%v",
		b.Name(), driver, n, info.Name, e.g, e.gRec, caps, c.record)

	before := -1
	if lc, ok := b.(LiveCounter); ok {
		before = lc.LiveHandles()
	}

	groups := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"device", testDevice},
		{"granularity", testGranularity},
		{"placement", testPlacement},
		{"data", testData},
		{"create", testCreate},
		{"release", testRelease},
		{"reserve", testReserve},
		{"free", testFree},
		{"map", testMap},
		{"unmap", testUnmap},
		{"access", testAccess},
		{"retain", testRetain},
		{"share", testShare},
		{"dmabuf", testDmaBuf},
		{"fabric", testFabric},
		{"peer", testPeer},
		{"multicast", testMulticast},
		{"multicast-v2", testMulticastV2},
		{"pointer", testPointer},
		{"ipc", testIPC},
		{"copy", testCopy},
		{"limits", testLimits},
		{"planes", testPlanes},
		{"sweep", testSweep},
		{"edges", testEdges},
		{"walk", testWalk},
		{"faults", testFaults},
		{"dangerous", testDangerous},
	}
	ran := map[string]bool{} // groups that ran to the end, neither skipped nor failed
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			defer func() { ran[g.name] = !t.Skipped() && !t.Failed() }()
			g.run(t, e)
		})
	}
	for _, name := range c.unreached(ran) {
		t.Errorf("deviation %s: declared, but the %s group ran without reaching it", name, group(name))
	}

	if lc, ok := b.(LiveCounter); ok {
		equal(t, before, lc.LiveHandles(), "the suite leaked handles")
	}
	if c.record {
		noError(t, c.write(recordPath, driver, info.Name))
		t.Logf("vmmtest: recorded %d results to %s", len(c.seen), recordPath)
	}
}

func needLinux(t *testing.T) {
	skipIf(t, runtime.GOOS != "linux", "POSIX file descriptors: Linux only")
}

// skipIf skips the test, saying why, when cond holds.
func skipIf(t *testing.T, cond bool, why string) {
	t.Helper()
	if cond {
		t.Skip(why)
	}
}
