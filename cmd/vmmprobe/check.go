package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
)

// Check statuses.
const (
	statusOK          = "ok"          // it worked, data checked
	statusUnsupported = "unsupported" // the device, driver or node configuration does not offer it
	statusFailed      = "failed"      // it should have worked (the device says it is supported) and did not
	statusSkipped     = "skipped"     // not run: an earlier step failed, or (multicast) not opted in
)

// checkResult is one operation exercised by `vmmprobe check`.
type checkResult struct {
	Backend string `json:"backend"`
	Check   string `json:"check"`
	// Device is the device the check ran on; Peer the second device of a peer check.
	// Node-wide checks (multicast) have neither and list Devices instead.
	Device  *int   `json:"device,omitempty"`
	Peer    *int   `json:"peer,omitempty"`
	Devices []int  `json:"devices,omitempty"`
	Status  string `json:"status"`
	// Result is the CUDA_ERROR_ name the driver returned, when the failure came from it.
	Result string `json:"result,omitempty"`
	// Error is the full error message.
	Error string `json:"error,omitempty"`
	// Detail says what was found, for people.
	Detail string `json:"detail,omitempty"`
	// Remedy is what an operator can do about an unsupported or failed check.
	Remedy string `json:"remedy,omitempty"`
}

type summary struct {
	OK          int `json:"ok"`
	Unsupported int `json:"unsupported"`
	Failed      int `json:"failed"`
	Skipped     int `json:"skipped"`
}

// checkOptions configure the checks.
type checkOptions struct {
	// childSpec names the backend a child process opens for the cross-process check
	// ("cuda" or "sim:PRESET").
	childSpec string
	// multicast creates a real multicast object (--unsafe-multicast).
	multicast bool
}

type checker struct {
	b    vmm.Backend
	m    *vmm.Manager
	doc  *document
	opts checkOptions
	// ipc is the child process of the cross-process check, started on first use and
	// shared by every device.
	ipc *ipcChild
}

// runChecks exercises every device of doc and appends the results and their summary.
func runChecks(b vmm.Backend, doc *document, opts checkOptions) {
	c := &checker{b: b, m: vmm.New(b), doc: doc, opts: opts}
	noVMM := map[int]bool{}
	for _, d := range doc.Devices {
		if !c.basic(d) {
			// Every other check allocates too: say so once, not once per check.
			noVMM[d.Index] = true
			for _, name := range []string{"posix-fd-export", "posix-fd-ipc", "fabric", "fabric-ipc", "compression", "gpudirect-rdma", "dma-buf", "host", "host-numa"} {
				c.add(skipped(name, d.Index, skipNoVMM))
			}
			continue
		}
		c.posixFD(d)
		c.fabric(d)
		c.compression(d)
		c.gpuDirectRDMA(d)
		c.dmaBuf(d)
		c.host(d, false)
		c.host(d, true)
	}
	if c.ipc != nil {
		c.ipc.close()
	}
	for _, p := range doc.Peers {
		if noVMM[p.Device] || noVMM[p.Peer] {
			r := skipped("peer-map", p.Device, skipNoVMM)
			r.Peer = intp(p.Peer)
			c.add(r)
			continue
		}
		c.peer(p)
	}
	c.multicastCheck()
	s := &summary{}
	for _, r := range doc.Checks {
		switch r.Status {
		case statusOK:
			s.OK++
		case statusUnsupported:
			s.Unsupported++
		case statusFailed:
			s.Failed++
		case statusSkipped:
			s.Skipped++
		}
	}
	doc.Summary = s
}

func (c *checker) add(r checkResult) {
	r.Backend = c.b.Name()
	c.doc.Checks = append(c.doc.Checks, r)
}

func intp(i int) *int { return &i }

// result builds a check result from an error: ok without one; with one, failed when the
// device claims support and unsupported otherwise.
func result(name string, dev int, err error, claimed bool, detail string) checkResult {
	r := checkResult{Check: name, Device: intp(dev), Detail: detail}
	if err == nil {
		r.Status = statusOK
		return r
	}
	r.Result = resultName(err)
	r.Error = errText(err)
	if claimed {
		r.Status = statusFailed
	} else {
		r.Status = statusUnsupported
	}
	return r
}

func skipped(name string, dev int, why string) checkResult {
	return checkResult{Check: name, Device: intp(dev), Status: statusSkipped, Detail: why}
}

// size is the allocation size the checks use on a device: its minimum granularity.
func size(d deviceInfo) uint64 {
	if d.Granularity.Min != 0 {
		return d.Granularity.Min
	}
	return 2 << 20
}

// copyWindow is how much the feature and peer checks copy at each end of their memory;
// the basic and cross-process checks copy all of it.
const copyWindow = 64 << 10

// Stages of a trial, in order; the basic check reports each as its own check.
var basicStages = []string{"create", "reserve", "map", "set-access", "copy", "teardown"}

// trial is memory created, reserved, mapped, made accessible and copied through: the
// sequence every check that allocates runs.
type trial struct {
	mem *vmm.Allocation
	va  *vmm.Reservation
	mp  *vmm.Mapping
}

// errMismatch is a copy round trip that read back other bytes than it wrote.
var errMismatch = errors.New("data read back differs from data written")

// openTrial creates size bytes with props p, lets afterCreate inspect them (its failure is
// reported under the stage name it returns), reserves, maps, grants read-write access to
// the devices in access, and copies a pattern in with the first device of each pair of
// copies and out with the second: all of it, or with a window, only the first and the
// last window bytes. On failure it returns the stage that failed, having
// released what it made.
func (c *checker) openTrial(p vmm.Props, size uint64, access []int, copies [][2]int, window uint64, seed byte,
	afterCreate func(*vmm.Allocation) (string, error)) (t *trial, stage string, err error) {
	t = &trial{}
	defer func() {
		if err != nil {
			t.close()
			t = nil
		}
	}()
	if t.mem, err = c.m.Create(size, p); err != nil {
		return t, "create", err
	}
	if afterCreate != nil {
		if stage, err := afterCreate(t.mem); err != nil {
			return t, stage, err
		}
	}
	if t.va, err = c.m.Reserve(size); err != nil {
		return t, "reserve", err
	}
	if t.mp, err = t.va.Map(0, t.mem); err != nil {
		return t, "map", err
	}
	if err = t.mp.SetAccess(vmm.ReadWrite(access...)...); err != nil {
		return t, "set-access", err
	}
	for i, cp := range copies {
		if window == 0 || 2*window >= size {
			err = c.roundTrip(t.mp.Addr(), size, cp[0], cp[1], seed+byte(i))
		} else if err = c.roundTrip(t.mp.Addr(), window, cp[0], cp[1], seed+byte(i)); err == nil {
			err = c.roundTrip(t.mp.Addr()+cu.DevicePtr(size-window), window, cp[0], cp[1], seed+byte(i)+0x80)
		}
		if err != nil {
			return t, "copy", err
		}
	}
	return t, "", nil
}

// roundTrip writes a pattern at addr from device w's context and reads it back from r's.
func (c *checker) roundTrip(addr cu.DevicePtr, size uint64, w, r int, seed byte) error {
	want := pattern.Bytes(seed, int(size))
	if err := c.m.WriteAt(w, want, addr); err != nil {
		return err
	}
	got := make([]byte, size)
	if err := c.m.ReadAt(r, got, addr); err != nil {
		return err
	}
	return compare(got, want)
}

func compare(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%w: byte %d of %d is %#02x, wrote %#02x", errMismatch, i, len(want), got[i], want[i])
		}
	}
	return errMismatch
}

// close unmaps, frees and releases what the trial holds.
func (t *trial) close() error {
	var errs []error
	if t.va != nil {
		errs = append(errs, t.va.Close())
	}
	if t.mem != nil {
		errs = append(errs, t.mem.Close())
	}
	return errors.Join(errs...)
}

const skipNoVMM = "not run: virtual memory management is unsupported"

// basic runs create, reserve, map, set access, a copy round trip and teardown on device
// memory, reporting each step. It returns false when creating memory is unsupported (so
// nothing else that allocates can work).
func (c *checker) basic(d deviceInfo) bool {
	dev := d.Index
	t, stage, err := c.openTrial(vmm.DeviceProps(dev), size(d), []int{dev}, [][2]int{{dev, dev}}, 0, byte(dev), nil)
	failedAt := len(basicStages) - 1
	if err != nil {
		failedAt = indexOf(basicStages, stage)
	}
	for i, name := range basicStages[:len(basicStages)-1] {
		switch {
		case i < failedAt:
			c.add(result(name, dev, nil, true, ""))
		case i == failedAt:
			r := result(name, dev, err, d.VMM, "")
			if !d.VMM {
				r.Detail = "the device does not support virtual memory management"
			}
			r.Remedy = c.remedy(name, r, d)
			c.add(r)
		default:
			c.add(skipped(name, dev, "not run: "+stage+" "+r2s(d.VMM)))
		}
	}
	if t == nil {
		if stage == "create" {
			c.add(skipped("teardown", dev, "nothing was created"))
		} else {
			// openTrial released what it made; a failure there shows in the error of the stage.
			c.add(result("teardown", dev, nil, true, "released after the "+stage+" failure"))
		}
		return stage != "create" || d.VMM
	}
	r := result("teardown", dev, t.close(), true, "")
	r.Remedy = c.remedy("teardown", r, d)
	c.add(r)
	return true
}

func r2s(claimed bool) string {
	if claimed {
		return "failed"
	}
	return "is unsupported"
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return len(list)
}

// compression asks for generically compressible memory and reads back whether the driver
// made it so (asking is only a hint), then maps it and copies through it.
func (c *checker) compression(d deviceInfo) {
	dev := d.Index
	p := vmm.DeviceProps(dev)
	p.Compressible = true
	var compressible bool
	t, stage, err := c.openTrial(p, size(d), []int{dev}, [][2]int{{dev, dev}}, copyWindow, 0xc0, func(a *vmm.Allocation) (string, error) {
		var err error
		compressible, err = a.Compressible()
		return "properties", err
	})
	if err == nil {
		err = t.close()
		stage = "teardown"
	}
	r := result("compression", dev, err, d.GenericCompression, "")
	switch {
	case err != nil:
		r.Detail = stage + " failed"
	case compressible:
		r.Detail = "the allocation came back compressible (compressionType GENERIC); mapped and copied through"
	case d.GenericCompression:
		r.Status = statusUnsupported
		r.Detail = "the device attribute says generic compression is supported, but the driver returned uncompressible memory"
	default:
		r.Status = statusUnsupported
		r.Detail = "the device does not support generic compression: the allocation came back uncompressible"
	}
	r.Remedy = c.remedy("compression", r, d)
	c.add(r)
}

// gpuDirectRDMA creates memory usable by GPUDirect RDMA, maps it and copies through it.
func (c *checker) gpuDirectRDMA(d deviceInfo) {
	dev := d.Index
	p := vmm.DeviceProps(dev)
	p.GPUDirectRDMA = true
	c.simple("gpudirect-rdma", d, p, size(d), d.GPUDirectRDMAWithVMM, "created GPUDirect RDMA capable memory; mapped and copied through")
}

// host creates host memory (of the device's NUMA node with numa), maps it for the device
// and copies through it from the device's context.
func (c *checker) host(d deviceInfo, numa bool) {
	p := vmm.Props{Location: vmm.OnHost()}
	name, claimed, what := "host", d.HostVMM, "host memory"
	if numa {
		node := max(d.HostNUMAID, 0)
		p.Location = vmm.OnHostNUMA(node)
		name, claimed, what = "host-numa", d.HostNUMAVMM, fmt.Sprintf("memory of host NUMA node %d", node)
	}
	sz := size(d)
	if g, err := c.m.Granularity(p, false); err == nil && g > 0 {
		sz = g
	}
	c.simple(name, d, p, sz, claimed, "created "+what+", mapped it for the device and copied through it")
}

// simple runs one trial and reports it as one check.
func (c *checker) simple(name string, d deviceInfo, p vmm.Props, sz uint64, claimed bool, okDetail string) {
	dev := d.Index
	t, stage, err := c.openTrial(p, sz, []int{dev}, [][2]int{{dev, dev}}, copyWindow, byte(len(name)), nil)
	if err == nil {
		err = t.close()
		stage = "teardown"
	}
	r := result(name, dev, err, claimed, okDetail)
	if err != nil {
		r.Detail = stage + " failed"
		if !claimed {
			r.Detail = "the device does not support it (" + stage + " failed)"
		}
	}
	r.Remedy = c.remedy(name, r, d)
	c.add(r)
}

// peer puts memory on p.Device, maps it with access for both devices, and copies through
// it from each device's context, reading back from the other's.
func (c *checker) peer(p peerInfo) {
	a, b := p.Device, p.Peer
	d := c.doc.Devices[a]
	t, stage, err := c.openTrial(vmm.DeviceProps(a), size(d), []int{a, b}, [][2]int{{a, b}, {b, a}}, copyWindow, byte(16*a+b), nil)
	if err == nil {
		err = t.close()
		stage = "teardown"
	}
	r := result("peer-map", a, err, p.Access, "")
	r.Peer = intp(b)
	switch {
	case err == nil:
		r.Detail = fmt.Sprintf("memory of device %d, mapped for devices %d and %d, written and read back by each", a, a, b)
	case !p.Access:
		r.Detail = fmt.Sprintf("device %d cannot access device %d's memory (%s failed)", b, a, stage)
	default:
		r.Detail = stage + " failed"
	}
	r.Remedy = c.remedy("peer-map", r, d)
	c.add(r)
}

// multicastCheck reports multicast from the device attributes unless --unsafe-multicast
// was given; with it, it creates a multicast object over every multicast-capable device,
// adds the devices, binds memory of each, and takes it all down again.
func (c *checker) multicastCheck() {
	var devs []int
	for _, d := range c.doc.Devices {
		if d.Multicast.Supported {
			devs = append(devs, d.Index)
		}
	}
	r := checkResult{Check: "multicast", Devices: devs}
	if !c.opts.multicast {
		r.Status = statusSkipped
		if len(devs) == 0 {
			r.Detail = "not exercised; no device reports multicast support"
		} else {
			r.Detail = "not exercised (creating a multicast object needs --unsafe-multicast); the device attribute says multicast is supported on devices " + joinInts(devs)
		}
		c.add(r)
		return
	}
	if len(devs) == 0 {
		r.Status = statusUnsupported
		r.Detail = "no device reports multicast support"
		c.add(r)
		return
	}
	step, err := exerciseMulticast(c.m, c.doc.Devices, devs)
	if err == nil {
		r.Status = statusOK
		r.Detail = fmt.Sprintf("created a multicast object, added devices %s, bound memory of each, unbound and released it", joinInts(devs))
	} else {
		r.Status = statusFailed
		r.Result = resultName(err)
		r.Error = errText(err)
		r.Detail = step + " failed"
		r.Remedy = c.remedy("multicast", r, c.doc.Devices[devs[0]])
	}
	c.add(r)
}

// exerciseMulticast creates a multicast object over devs, adds each device, binds memory
// of each, then unbinds and releases everything. It returns the step that failed.
func exerciseMulticast(m *vmm.Manager, all []deviceInfo, devs []int) (string, error) {
	props := vmm.MulticastProps{Devices: len(devs), Size: size(all[devs[0]])}
	g, err := m.MulticastGranularity(props, false)
	if err != nil {
		return "granularity", err
	}
	var ok bool
	for _, align := range append([]uint64{g}, sizesOf(all, devs)...) {
		if props.Size, ok = units.AlignUp(props.Size, align); !ok {
			return "granularity", fmt.Errorf("%w: multicast size overflows", vmm.ErrTooLarge)
		}
	}
	mc, err := m.CreateMulticast(props)
	if err != nil {
		return "create", err
	}
	var mems []*vmm.Allocation
	step, err := func() (string, error) {
		for _, i := range devs {
			if err := mc.AddDevice(i); err != nil {
				return fmt.Sprintf("add device %d", i), err
			}
		}
		for _, i := range devs {
			mem, err := m.Create(props.Size, vmm.DeviceProps(i))
			if err != nil {
				return fmt.Sprintf("create memory on device %d", i), err
			}
			mems = append(mems, mem)
			if err := mc.Bind(0, mem, 0, props.Size); err != nil {
				return fmt.Sprintf("bind memory of device %d", i), err
			}
		}
		return "", nil
	}()
	// Close unbinds what was bound, then releases the object.
	if cerr := mc.Close(); cerr != nil && err == nil {
		step, err = "unbind and release", cerr
	}
	for _, mem := range mems {
		if cerr := mem.Close(); cerr != nil && err == nil {
			step, err = "release memory", cerr
		}
	}
	return step, err
}

func sizesOf(all []deviceInfo, devs []int) []uint64 {
	out := make([]uint64, len(devs))
	for k, i := range devs {
		out[k] = size(all[i])
	}
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
