package vmmfuzz_test

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/peer"
	"github.com/cuvmm/cuvmm/vmm/sparse"
)

// A program is bytes: a configuration byte, then steps of stepBytes each (an operation
// and its argument bytes). Step k runs on worker k mod workers; a program decodes from any
// bytes, and bytes missing at the end read as zero.
const (
	mib       = 1 << 20
	stepBytes = 8
	maxSteps  = 192
	maxInput  = 1 + maxSteps*stepBytes
)

// presets are the machines a program may run on, by its configuration byte: mostly the
// one with every feature (four devices, fabric handles with IMEX, multicast, host NUMA),
// once with a CUDA 13.1 driver (the multicast binds of a device).
var presets = []func() sim.Config{
	sim.PresetMNNVL, sim.PresetMNNVL, sim.PresetMNNVL,
	func() sim.Config { c := sim.PresetMNNVL(); c.DriverVersion = 13010; return c },
	sim.PresetHGX8, sim.PresetH100, sim.PresetWorkstation, sim.PresetOldGPU,
}

type step struct {
	op  byte
	arg [stepBytes - 1]byte
}

type program struct {
	preset      int
	workers     int  // 2 to 4
	serial      bool // run the steps one after another, in order, on one goroutine
	tight       bool // cap each device at 64 MiB, so that growth runs out of memory
	refuseHints bool // the Sim never honours an address hint
	steps       [][]step
}

func decode(b []byte) program {
	if len(b) > maxInput {
		b = b[:maxInput]
	}
	var c byte
	if len(b) > 0 {
		c, b = b[0], b[1:]
	}
	p := program{
		preset:      int(c & 7),
		workers:     2 + int(c>>3&3)%3,
		serial:      c&0x20 != 0,
		tight:       c&0x40 != 0,
		refuseHints: c&0x80 != 0,
	}
	p.steps = make([][]step, p.workers)
	for k := 0; len(b) > 0; k++ {
		var st step
		st.op, b = b[0], b[1:]
		n := copy(st.arg[:], b)
		b = b[n:]
		p.steps[k%p.workers] = append(p.steps[k%p.workers], st)
	}
	return p
}

// foreignSkip is how many handle values the foreign Sim hands out (and releases) before a
// run uses it: a Sim's values grow with the handles it has made, so the foreign Sim's
// later values, above foreignFloor, are far beyond any a run's Sim reaches (it makes fewer
// than foreignSkip/2), and so unknown there, as a value from another process is to the
// driver.
const foreignSkip = 1 << 16

// foreignFloor is the highest value the foreign Sim handed out while skipping; set by
// foreign.
var foreignFloor cu.MemHandle

// foreign is the other Sim, shared by the runs of this process (each leaves it as it found
// it):
// every feature, no faults.
var foreign = sync.OnceValue(func() *sim.Sim {
	s, err := sim.New(sim.PresetMNNVL())
	if err != nil {
		panic(err)
	}
	prop := vmm.DeviceProps(0).Driver()
	for range foreignSkip {
		h, err := s.Create(2*mib, &prop, 0)
		if err != nil {
			panic(err)
		}
		foreignFloor = max(foreignFloor, h)
		if err := s.Release(h); err != nil {
			panic(err)
		}
	}
	return s
})

// span is an address range.
type span struct {
	ptr  cu.DevicePtr
	size uint64
}

func (sp span) end() cu.DevicePtr { return sp.ptr + cu.DevicePtr(sp.size) }

// world is one run: the Sim under test and the foreign one, Managers over both, and pools
// of what the workers made. Any worker may use or close any pooled object, and closed
// objects stay in the pools as inputs. The raw pools own what they hold: each handle
// entry is one reference, each span one reservation or mapping, each descriptor open.
type world struct {
	t    testing.TB
	s, f *sim.Sim
	m    *vmm.Manager
	fm   *vmm.Manager
	devs int
	gran uint64

	// rawMu keeps the raw mappings' pool true: a raw Map and its record hold it shared, an
	// Unmap or Free whose success drops records holds it alone, so that no mapping made
	// meanwhile is dropped with the ones the call removed.
	rawMu sync.RWMutex

	mu         sync.Mutex // guards the pools below
	allocs     []*vmm.Allocation
	resvs      []*vmm.Reservation
	maps       []*vmm.Mapping
	bufs       []*buffer.Buffer
	arrays     []*sparse.Array
	mems       []*peer.Memory
	multicasts []*vmm.Multicast
	pending    vmm.Pending // the releases the rollbacks of tx could not do
	stripes    []*peer.Striped
	exported   []*ipc.Exported
	imported   []*ipc.Imported
	fabric     []ipc.FabricHandle
	handles    []sized // raw, on s
	mcs        []sized // raw multicast objects, on s
	ranges     []span  // raw reservations, on s
	rmaps      []span  // raw mappings, on s
	fds        []int
	closers    []io.Closer    // objects the nil cases made
	fBefore    sim.Stats      // the foreign Sim when the run began
	known      map[string]int // known bugs hit, by case
	errs       int
}

func newWorld(t testing.TB, p program) *world {
	cfg := presets[p.preset]()
	cfg.RefuseHints = p.refuseHints
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := foreign()
	var b vmm.Backend = s
	if wrap != nil {
		b = wrap(s)
	}
	w := &world{t: t, s: s, f: f, m: vmm.New(b), fm: vmm.New(f), devs: len(cfg.Devices),
		gran: 2 * mib, known: map[string]int{}, fBefore: f.Stats()}
	if p.tight {
		for d := range w.devs {
			if err := s.SetCapacity(d, 64*mib); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w
}

// run runs a program and checks what it left.
func run(t testing.TB, data []byte) {
	p := decode(data)
	foreign()
	otherFD()
	warmUp()
	before := openFDs(t)
	w := newWorld(t, p)
	if p.serial {
		for k := 0; ; k++ {
			st, ok := nth(p.steps, k)
			if !ok {
				break
			}
			w.step(st)
		}
	} else {
		var wg sync.WaitGroup
		for _, steps := range p.steps {
			wg.Go(func() {
				for _, st := range steps {
					w.step(st)
				}
			})
		}
		wg.Wait()
	}
	w.teardown()
	// A peer's descriptor that is neither memory nor a dma-buf (/dev/null) is closed on a
	// goroutine of its own (ipc's Received.Close), which may not have run yet.
	left := openFDs(t).since(before)
	for end := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(end); left = openFDs(t).since(before) {
		time.Sleep(time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("descriptors left open by the run: %v", left)
	}
}

// nth is step k of the program in input order (worker k mod workers, its step k/workers).
func nth(steps [][]step, k int) (step, bool) {
	n := len(steps)
	if ws := steps[k%n]; k/n < len(ws) {
		return ws[k/n], true
	}
	return step{}, false
}

// step runs one operation; a panic anywhere in it fails the run.
func (w *world) step(st step) {
	o := &ops[int(st.op)%len(ops)]
	defer func() {
		if r := recover(); r != nil {
			w.t.Errorf("%s panicked: %v\n%s", o.name, r, debug.Stack())
		}
	}()
	if trace != nil {
		trace(o.name, nil)
	}
	o.fn(w, &args{b: st.arg[:]})
}

// wrap, when set (while debugging a program), wraps the Sim under test in the Backend the
// typed layer and the blocks use, to watch their calls.
var wrap func(*sim.Sim) vmm.Backend

// trace, when set (while debugging a program), sees each step's operation (with a nil
// error) and each error checked. It may be called from several goroutines at once.
var trace func(call string, err error)

// errorf reports a failed check, at most a few dozen per run.
func (w *world) errorf(format string, a ...any) {
	w.mu.Lock()
	w.errs++
	n := w.errs
	w.mu.Unlock()
	if n <= 30 {
		w.t.Errorf(format, a...)
	}
}

// prefixes start the message of every error cuvmm returns: the package that failed.
var prefixes = []string{"vmm: ", "sim: ", "buffer: ", "sparse: ", "peer: ", "ipc: ", "pidfd: "}

// check asserts that err, returned by call, is descriptive: it starts with the package
// that failed, names the operation (one of words), and is not a bare driver result.
func (w *world) check(call string, err error, words ...string) {
	if err == nil {
		return
	}
	if trace != nil {
		trace(call, err)
	}
	msg := err.Error()
	if _, bare := err.(cu.Result); bare {
		w.errorf("%s: returned the bare driver result %v", call, err)
		return
	}
	if r, ok := cu.ResultOf(err); ok && (msg == r.Error() || msg == r.String()) {
		w.errorf("%s: %q is only the driver's result", call, msg)
		return
	}
	if !hasPrefix(msg, prefixes) {
		w.errorf("%s: %q does not say which package failed", call, msg)
		return
	}
	for _, word := range words {
		if strings.Contains(msg, word) {
			return
		}
	}
	w.errorf("%s: %q names none of the operations %q", call, msg, words)
}

func hasPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// pool helpers: pick returns an element (left in the pool), take removes one, put adds.

func pick[T any](w *world, a *args, s *[]T) (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var z T
	if len(*s) == 0 {
		return z, false
	}
	return (*s)[a.n(len(*s))], true
}

func take[T any](w *world, a *args, s *[]T) (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var z T
	if len(*s) == 0 {
		return z, false
	}
	i := a.n(len(*s))
	v := (*s)[i]
	(*s)[i] = (*s)[len(*s)-1]
	*s = (*s)[:len(*s)-1]
	return v, true
}

func put[T any](w *world, s *[]T, v T) {
	w.mu.Lock()
	*s = append(*s, v)
	w.mu.Unlock()
}

// dropSpans removes the raw mappings that start in [from, to) (whole: those lying wholly
// inside it).
func (w *world) dropSpans(from, to cu.DevicePtr, whole bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.rmaps[:0]
	for _, sp := range w.rmaps {
		in := sp.ptr >= from && sp.ptr < to
		if whole {
			in = in && sp.end() <= to && sp.end() >= sp.ptr
		}
		if !in {
			kept = append(kept, sp)
		}
	}
	w.rmaps = kept
}

// teardown clears the faults, closes everything the run made and checks that both Sims
// are clean. With no fault armed every Close must succeed, whatever the run did to the
// objects.
func (w *world) teardown() {
	w.s.ClearFaults()
	must := func(what string, err error) {
		if err != nil {
			w.errorf("teardown: %s: %v", what, err)
		}
	}
	// Raw mappings first: they may run into the reservations of typed objects. A record
	// may be stale: a raw mapping made inside an object's reservation goes when the object
	// unmaps its range (sparse.Array.Close unmaps its whole range, say), and the range may
	// be free since. What is really left shows in the Stats below.
	for _, sp := range w.rmaps {
		w.s.Unmap(sp.ptr, sp.size)
	}
	for _, x := range w.imported {
		must("ipc import close", x.Close())
	}
	for _, x := range w.exported {
		must("ipc export close", x.Close())
	}
	for _, x := range w.bufs {
		must("buffer close", x.Close())
	}
	for _, x := range w.arrays {
		must("sparse close", x.Close())
	}
	for _, x := range w.mems {
		must("peer close", x.Close())
	}
	for _, x := range w.stripes {
		must("stripe close", x.Close())
	}
	for _, x := range w.maps {
		must("mapping close", x.Close())
	}
	for _, x := range w.resvs {
		must("reservation close", x.Close())
	}
	for _, x := range w.multicasts {
		must("multicast close", x.Close())
	}
	must("pending retry", w.pending.Retry())
	// What failed constructors, transactions without a list and Pointer could not release.
	must("manager pending retry", w.m.Pending().Retry())
	must("foreign manager pending retry", w.fm.Pending().Retry())
	for _, x := range w.allocs {
		must("allocation close", x.Close())
	}
	for _, x := range w.closers {
		must(fmt.Sprintf("%T close", x), x.Close())
	}
	for _, h := range w.mcs {
		must("raw multicast release", w.s.Release(h.h))
	}
	for _, h := range w.handles {
		must("raw release", w.s.Release(h.h))
	}
	for _, sp := range w.ranges {
		must("raw free", w.s.Free(sp.ptr, sp.size))
	}
	for _, fd := range w.fds {
		must("close descriptor", closeFD(fd))
	}
	// The foreign Sim outlives the run: it must hold what it held before (nothing, unless
	// an earlier run's leak was excused).
	for name, clean := range map[string]bool{"the Sim": w.s.Stats().Clean(), "the foreign Sim": sameHoldings(w.fBefore, w.f.Stats())} {
		st := w.s.Stats()
		if name != "the Sim" {
			st = w.f.Stats()
		}
		switch {
		case clean:
		default:
			w.errorf("%s is not clean after closing everything: %+v", name, stripCalls(st))
		}
	}
	// The foreign Sim's values must stay unknown to the Sim: it handed out foreignSkip
	// values before the run.
	c := w.s.Stats().Calls
	if n := c["Create"] + c["ImportFD"] + c["ImportFabric"] + c["ImportWin32"] + c["MulticastCreate"]; n >= foreignSkip/2 {
		w.t.Fatalf("the program made %d handles: raise foreignSkip", n)
	}
	for name, n := range w.known {
		w.t.Logf("known bug hit %d times, not checked: %s", n, name)
	}
}

// sameHoldings reports whether a and b hold the same: handles, memory, address space.
func sameHoldings(a, b sim.Stats) bool {
	a.Calls, b.Calls, a.Resident, b.Resident = nil, nil, 0, 0
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func stripCalls(st sim.Stats) sim.Stats {
	st.Calls = nil
	return st
}

// args reads an operation's argument bytes. Past them it reads a stream that they seed
// (splitmix64), so that an operation that needs more bytes than a step has still gets
// varied ones, and the step's bytes still decide them.
type args struct {
	b []byte
	i int
	x uint64
}

func (a *args) byte() byte {
	if a.i < len(a.b) {
		c := a.b[a.i]
		a.i++
		return c
	}
	if a.i == len(a.b) {
		a.i++
		a.x = 0xcbf29ce484222325
		for _, c := range a.b {
			a.x = (a.x ^ uint64(c)) * 0x100000001b3
		}
	}
	a.x += 0x9e3779b97f4a7c15
	z := a.x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return byte(z ^ z>>31)
}

// n is a number in [0, k).
func (a *args) n(k int) int {
	if k <= 0 {
		return 0
	}
	return int(a.byte()) % k
}

func (a *args) bit() bool { return a.byte()&1 != 0 }

// of picks one of vs.
func of[T any](a *args, vs ...T) T { return vs[a.n(len(vs))] }

// size is a size in bytes: mostly a few granules, sometimes a wrong or huge one.
func (a *args) size(g uint64) uint64 {
	c := a.byte()
	if c < 216 {
		return g * uint64(1+c%4)
	}
	return of(a, 0, 1, g/2, g+1, g-1, 8*g, 32*g, 1<<40, 1<<63, ^uint64(0), ^uint64(0)&^(g-1), 1<<47, 3*g/2)
}

// smallSize is a size for objects that commit what they are given (buffers, sparse
// arrays, peer memory): at most 64 granules, or one that must fail.
func (a *args) smallSize(g uint64) uint64 {
	c := a.byte()
	if c < 160 {
		return g * uint64(c%5)
	}
	return of(a, 1, g/2, g+1, 16*g, 64*g, 1<<63, ^uint64(0), ^uint64(0)&^(g-1))
}

// offset is an offset into something of size n.
func (a *args) offset(n, g uint64) uint64 {
	return of(a, 0, 0, g, 2*g, n/2, n-g, n, n+g, 1, g-1, n-1, 1<<63, ^uint64(0))
}

// count is a length for copies.
func (a *args) count() uint64 {
	return of[uint64](a, 1, 8, 4096, 1<<16, 0, 1<<20+1, 1<<63, ^uint64(0))
}

// buf is a host buffer for a copy: never more than 1 MiB.
func (a *args) buf() []byte {
	n := of(a, 1, 8, 4096, 1<<16, 0, 4097)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// dev is a device ordinal, sometimes one that does not exist.
func (a *args) dev(devs int) int {
	c := a.byte()
	if c < 224 {
		return int(c) % devs
	}
	return of(a, -1, devs, 1<<20, -1<<31)
}

func (a *args) devList(devs int) []int {
	switch a.n(16) {
	case 0:
		return nil
	case 1:
		return []int{}
	}
	l := make([]int, 1+a.n(4))
	for i := range l {
		l[i] = a.dev(devs)
	}
	return l
}

// props are allocation properties: mostly device memory, sometimes host memory, odd
// handle types or a bad location.
func (a *args) props(devs int) vmm.Props {
	var p vmm.Props
	switch a.n(16) {
	case 0:
		p.Location = of(a, vmm.OnHost(), vmm.OnHostNUMA(0), vmm.OnHostNUMA(1), vmm.OnHostNUMA(7), vmm.OnHostNUMACurrent())
	case 1:
		p.Location = of(a, vmm.Location{}, vmm.Location{Type: 99}, vmm.OnDevice(-1), vmm.OnDevice(devs))
	default:
		p.Location = vmm.OnDevice(a.dev(devs))
	}
	if p.Location.Type == cu.MEM_LOCATION_TYPE_DEVICE {
		p.HandleTypes = of(a, cu.MEM_HANDLE_TYPE_NONE, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
			cu.MEM_HANDLE_TYPE_FABRIC, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR|cu.MEM_HANDLE_TYPE_FABRIC)
	}
	if a.n(16) == 0 {
		p.HandleTypes = of(a, cu.MEM_HANDLE_TYPE_WIN32, cu.MEM_HANDLE_TYPE_WIN32_KMT, 0xff, cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	}
	c := a.byte()
	p.Compressible = c&1 != 0
	p.GPUDirectRDMA = c&2 != 0
	if c&4 != 0 {
		p.Usage = uint16(c >> 3)
	}
	return p
}

// access is a list of access descriptors: mostly valid ones for a few devices.
func (a *args) access(devs int) []cu.MemAccessDesc {
	switch a.n(16) {
	case 0:
		return nil
	case 1:
		return []cu.MemAccessDesc{{Location: vmm.OnHost(), Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}
	case 2:
		return []cu.MemAccessDesc{{Location: vmm.OnDevice(a.dev(devs)), Flags: cu.MemAccessFlags(a.byte())}}
	}
	ds := a.devList(devs)
	if len(ds) == 0 {
		ds = []int{0}
	}
	return of(a, vmm.ReadWrite(ds...), vmm.ReadOnly(ds...), vmm.NoAccess(ds...), vmm.ReadWrite(ds...))
}

// fdSet is the open descriptors, each with the device and inode of its file (nil where
// they cannot be listed).
type fdSet map[int][2]uint64

// since lists the descriptors of s that were not open on the same file in before: those
// a run opened and left open. One that closed meanwhile (a finalizer of an earlier run's
// file) does not count.
func (s fdSet) since(before fdSet) []string {
	var left []string
	for fd, id := range s {
		if was, ok := before[fd]; !ok || was != id {
			left = append(left, fmt.Sprintf("%d (dev %d inode %d)", fd, id[0], id[1]))
		}
	}
	return left
}
