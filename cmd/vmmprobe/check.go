package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
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
		for _, k := range shareKinds {
			c.share(d, k)
		}
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
	count := map[string]*int{statusOK: &s.OK, statusUnsupported: &s.Unsupported, statusFailed: &s.Failed, statusSkipped: &s.Skipped}
	for _, r := range doc.Checks {
		if n := count[r.Status]; n != nil {
			*n++
		}
	}
	doc.Summary = s
}

// add appends a result, with the remedy of its device (the first of a node-wide check's)
// when it has none of its own.
func (c *checker) add(r checkResult) {
	r.Backend = c.b.Name()
	dev := r.Devices
	if r.Device != nil {
		dev = []int{*r.Device}
	}
	if r.Remedy == "" && len(dev) > 0 {
		r.Remedy = checkFix(r.Check, r, c.doc.Devices[dev[0]]).text(c.doc.Backend.Simulated)
	}
	c.doc.Checks = append(c.doc.Checks, r)
}

func intp(i int) *int { return &i }

// result builds a check result from an error: ok without one; with one, failed when the
// device claims support and unsupported otherwise.
func result(name string, dev int, err error, claimed bool, detail string) checkResult {
	r := checkResult{Check: name, Device: intp(dev), Detail: detail, Status: statusOK}
	if err != nil {
		r.Result, r.Error, r.Status = resultName(err), errText(err), statusUnsupported
		if claimed {
			r.Status = statusFailed
		}
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
// devs, and copies a pattern in and out with the device (or, for two, in with each and out
// with the other): all of it, or with a window, only the first and the last window bytes.
// On failure it returns the stage that failed, having released what it made.
func openTrial(m *vmm.Manager, p vmm.Props, size uint64, devs []int, window uint64, seed byte,
	afterCreate func(*vmm.Allocation) (string, error)) (t *trial, stage string, err error) {
	copies := [][2]int{{devs[0], devs[0]}}
	if len(devs) == 2 {
		copies = [][2]int{{devs[0], devs[1]}, {devs[1], devs[0]}}
	}
	t = &trial{}
	defer func() {
		if err != nil {
			t.close()
			t = nil
		}
	}()
	if t.mem, err = m.Create(size, p); err != nil {
		return t, "create", err
	}
	if afterCreate != nil {
		if stage, err := afterCreate(t.mem); err != nil {
			return t, stage, err
		}
	}
	if t.va, err = m.Reserve(size); err != nil {
		return t, "reserve", err
	}
	if t.mp, err = t.va.Map(0, t.mem); err != nil {
		return t, "map", err
	}
	if err = t.mp.SetAccess(vmm.ReadWrite(devs...)...); err != nil {
		return t, "set-access", err
	}
	for i, cp := range copies {
		if window == 0 || 2*window >= size {
			err = roundTrip(m, t.mp.Addr(), size, cp[0], cp[1], seed+byte(i))
		} else if err = roundTrip(m, t.mp.Addr(), window, cp[0], cp[1], seed+byte(i)); err == nil {
			err = roundTrip(m, t.mp.Addr()+cu.DevicePtr(size-window), window, cp[0], cp[1], seed+byte(i)+0x80)
		}
		if err != nil {
			return t, "copy", err
		}
	}
	return t, "", nil
}

// roundTrip writes a pattern at addr from device w's context and reads it back from r's.
func roundTrip(m *vmm.Manager, addr cu.DevicePtr, size uint64, w, r int, seed byte) error {
	want := pattern.Bytes(seed, int(size))
	if err := m.WriteAt(w, want, addr); err != nil {
		return err
	}
	got := make([]byte, size)
	if err := m.ReadAt(r, got, addr); err != nil {
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
	t, stage, err := openTrial(c.m, vmm.DeviceProps(dev), size(d), []int{dev}, 0, byte(dev), nil)
	failedAt := len(basicStages) - 1
	if err != nil {
		failedAt = slices.Index(basicStages, stage)
	}
	notRun := "not run: " + stage + " is unsupported"
	if d.VMM {
		notRun = "not run: " + stage + " failed"
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
			c.add(r)
		default:
			c.add(skipped(name, dev, notRun))
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
	c.add(result("teardown", dev, t.close(), true, ""))
	return true
}

// compression asks for generically compressible memory and reads back whether the driver
// made it so (asking is only a hint), then maps it and copies through it.
func (c *checker) compression(d deviceInfo) {
	dev := d.Index
	p := vmm.DeviceProps(dev)
	p.Compressible = true
	var compressible bool
	r, _ := c.trialCheck("compression", p, size(d), []int{dev}, 0xc0, d.GenericCompression, func(a *vmm.Allocation) (string, error) {
		var err error
		compressible, err = a.Compressible()
		return "properties", err
	})
	switch {
	case r.Status != statusOK:
	case compressible:
		r.Detail = "the allocation came back compressible (compressionType GENERIC); mapped and copied through"
	case d.GenericCompression:
		r.Status, r.Detail = statusUnsupported, "the device attribute says generic compression is supported, but the driver returned uncompressible memory"
	default:
		r.Status, r.Detail = statusUnsupported, "the device does not support generic compression: the allocation came back uncompressible"
	}
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

// trialCheck runs one trial on devs (the first holds the memory) through its teardown and
// returns it as check name, with the stage that failed.
func (c *checker) trialCheck(name string, p vmm.Props, sz uint64, devs []int, seed byte, claimed bool,
	afterCreate func(*vmm.Allocation) (string, error)) (checkResult, string) {
	t, stage, err := openTrial(c.m, p, sz, devs, copyWindow, seed, afterCreate)
	if err == nil {
		err, stage = t.close(), "teardown"
	}
	r := result(name, devs[0], err, claimed, "")
	if err != nil {
		r.Detail = stage + " failed"
	}
	return r, stage
}

// simple runs one trial and reports it as one check.
func (c *checker) simple(name string, d deviceInfo, p vmm.Props, sz uint64, claimed bool, okDetail string) {
	r, stage := c.trialCheck(name, p, sz, []int{d.Index}, byte(len(name)), claimed, nil)
	switch {
	case r.Status == statusOK:
		r.Detail = okDetail
	case !claimed:
		r.Detail = "the device does not support it (" + stage + " failed)"
	}
	c.add(r)
}

// peer puts memory on p.Device, maps it with access for both devices, and copies through
// it from each device's context, reading back from the other's.
func (c *checker) peer(p peerInfo) {
	a, b := p.Device, p.Peer
	r, stage := c.trialCheck("peer-map", vmm.DeviceProps(a), size(c.doc.Devices[a]), []int{a, b}, byte(16*a+b), p.Access, nil)
	r.Peer = intp(b)
	switch {
	case r.Status == statusOK:
		r.Detail = fmt.Sprintf("memory of device %d, mapped for devices %d and %d, written and read back by each", a, a, b)
	case !p.Access:
		r.Detail = fmt.Sprintf("device %d cannot access device %d's memory (%s failed)", b, a, stage)
	}
	c.add(r)
}

// multicastCheck reports multicast from the device attributes unless --unsafe-multicast
// was given; with it, it creates a multicast object over every multicast-capable device,
// adds the devices, binds memory of each, and takes it all down again.
func (c *checker) multicastCheck() {
	devs := multicastDevices(c.doc.Devices)
	r := checkResult{Check: "multicast", Devices: devs, Status: statusSkipped}
	switch {
	case !c.opts.multicast && len(devs) == 0:
		r.Detail = "not exercised; no device reports multicast support"
	case !c.opts.multicast:
		r.Detail = "not exercised (creating a multicast object needs --unsafe-multicast); the device attribute says multicast is supported on devices " + joinInts(devs)
	case len(devs) == 0:
		r.Status, r.Detail = statusUnsupported, "no device reports multicast support"
	default:
		if step, err := exerciseMulticast(c.m, c.doc.Devices, devs); err != nil {
			r.Status, r.Result, r.Error, r.Detail = statusFailed, resultName(err), errText(err), step+" failed"
		} else {
			r.Status = statusOK
			r.Detail = fmt.Sprintf("created a multicast object, added devices %s, bound memory of each, unbound and released it", joinInts(devs))
		}
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
	aligns := []uint64{g}
	for _, i := range devs {
		aligns = append(aligns, size(all[i]))
	}
	var ok bool
	for _, align := range aligns {
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

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// checkFix says what an operator can do about an unsupported or failed check (nothing for
// the others). Driver results that mean the same whatever the check come first; then what
// each check needs.
func checkFix(check string, r checkResult, d deviceInfo) fix {
	if r.Status != statusUnsupported && r.Status != statusFailed {
		return fix{}
	}
	// For failures, some driver results call for the same action whatever the check; an
	// unsupported check is explained by what the check needs.
	switch res := r.Result; {
	case r.Status != statusFailed:
	case res == "CUDA_ERROR_OUT_OF_MEMORY":
		return fix{do: fmt.Sprintf("device %d is out of memory: find the processes holding it ({cmd}) and free it", d.Index), cmd: "nvidia-smi"}
	case res == "CUDA_ERROR_DEVICE_UNAVAILABLE" || res == "CUDA_ERROR_INVALID_DEVICE" || res == "CUDA_ERROR_NO_DEVICE":
		return fix{do: fmt.Sprintf("device %d is not available to this process: check its compute mode ({cmd}: "+
			"Exclusive_Process admits one process), MIG, CUDA_VISIBLE_DEVICES and the container's device list", d.Index), cmd: "nvidia-smi -q -d COMPUTE"}
	case res == "CUDA_ERROR_ECC_UNCORRECTABLE" || res == "CUDA_ERROR_NVLINK_UNCORRECTABLE" || res == "CUDA_ERROR_CONTAINED" || res == "CUDA_ERROR_ILLEGAL_ADDRESS":
		return fix{do: fmt.Sprintf("device %d reported a hardware error: check the kernel log for Xid errors and the ECC counters ({cmd}); reset the GPU or drain the node", d.Index),
			cmd: "dmesg; nvidia-smi -q -d ECC"}
	case res == "CUDA_ERROR_SYSTEM_NOT_READY":
		return fix{do: "the NVSwitch fabric is not ready: start nvidia-fabricmanager and check its log ({cmd})", cmd: "systemctl status nvidia-fabricmanager"}
	}
	if strings.Contains(r.Error, errMismatch.Error()) {
		return fix{do: fmt.Sprintf("device %d returned other bytes than were written: check the kernel log for Xid errors and the ECC counters ({cmd}); reset the GPU or drain the node", d.Index),
			cmd: "dmesg; nvidia-smi -q -d ECC"}
	}
	switch check {
	case "create", "reserve", "map", "set-access", "copy", "teardown":
		if r.Status == statusUnsupported {
			return fix{do: "virtual memory management needs a CUDA 10.2+ driver and a device that supports it (compute capability 6.0+; not on vGPU profiles without unified memory)"}
		}
		return fix{do: "update the NVIDIA driver; if it persists, report it with the output of vmmprobe check -o json"}
	case "posix-fd-export":
		return fix{do: "POSIX file descriptor handles need Linux and a device that supports them; update the driver if the device should"}
	case "posix-fd-ipc", "fabric-ipc":
		if r.Status == statusUnsupported {
			return fix{do: "sharing memory with another process is checked on Linux only: run vmmprobe check there"}
		}
		return fix{do: "the child process must load the same driver and see the same device (same CUDA_VISIBLE_DEVICES and container devices); " +
			"seccomp or AppArmor profiles must allow SCM_RIGHTS over unix sockets"}
	case "fabric":
		if r.Result == "CUDA_ERROR_NOT_PERMITTED" {
			return fix{do: "an IMEX channel is accessible but the driver refused: start the nvidia-imex daemon ({cmd}) and check " + imexNodesConfig,
				cmd: "systemctl status nvidia-imex"}
		}
		return fix{do: "fabric handles need a GPU on an NVLink fabric (GH200, GB200, HGX with NVSwitch) and an R550+ driver"}
	case "compression":
		return fix{do: "generic compression needs a data-center GPU that supports it (A100 and newer) with compressible memory available; the driver may decline the request"}
	case "gpudirect-rdma":
		return fix{do: "GPUDirect RDMA with VMM needs a device that supports it (GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED); NICs also need the nvidia-peermem module"}
	case "dma-buf":
		return dmaBufFix(r)
	case "host", "host-numa":
		return fix{do: "host memory through VMM needs a CUDA 12.2+ driver and a device that supports it (HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)"}
	case "peer-map":
		return fix{do: "the devices cannot reach each other's memory: check the topology and NVLink state ({cmd}); " +
			"on PCIe, ACS or the IOMMU can block peer traffic; in VMs the hypervisor often disables it", cmd: "nvidia-smi topo -m; nvidia-smi nvlink -s"}
	case "multicast":
		return fix{do: "multicast needs NVSwitch (HGX H100/H200 and newer) with nvidia-fabricmanager running, a CUDA 12.1+ driver, and no other tenant holding the fabric's multicast resources"}
	}
	return fix{}
}

// fix is a remedy: what to do, in words (do), and the commands that do it on a real node
// (cmd), which take the place of "{cmd}" in the words. On a simulated node the commands
// are left out: there they would run on a machine with nothing to fix (a laptop showing
// the simulated fallback, say), so a remedy with commands says what a real node would
// need instead.
type fix struct {
	do  string
	cmd string
}

// cmdMark is where a fix's command goes in its words.
const cmdMark = "{cmd}"

func (f fix) text(simulated bool) string {
	if f.do == "" {
		return ""
	}
	if simulated && f.cmd != "" {
		do := strings.ReplaceAll(f.do, " ("+cmdMark+")", "")
		do = strings.ReplaceAll(do, " "+cmdMark, "")
		return "simulated node, nothing to run here; a real node would need: " + strings.ReplaceAll(do, cmdMark, "")
	}
	if f.cmd == "" || !strings.Contains(f.do, cmdMark) {
		return strings.ReplaceAll(f.do, " ("+cmdMark+")", "")
	}
	return strings.ReplaceAll(f.do, cmdMark, f.cmd)
}
