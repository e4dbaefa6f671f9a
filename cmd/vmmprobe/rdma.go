package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The kernel side of GPUDirect RDMA: what an RDMA NIC needs to read and write GPU memory.
// Two paths exist. The older one is the nvidia_peermem module (nv_peer_mem before it),
// through which the NIC's driver pins GPU memory that ibv_reg_mr is given; VMM memory must
// then be GPUDirect RDMA capable (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
// and the allocation's flag). The newer one is dma-buf: the GPU driver exports a
// descriptor for the memory (cuMemGetHandleForAddressRange) and the NIC registers it
// (ibv_reg_dmabuf_mr), which needs a 5.12 or later kernel with dma-buf support and a GPU
// driver that exports (the dma-buf check). A container sees the host's kernel but rarely its
// configuration: what can be read is said, what cannot is not guessed.

// rdmaReport is what vmmprobe check reads of the kernel side of GPUDirect RDMA.
type rdmaReport struct {
	// Devices are the RDMA devices the kernel lists (/sys/class/infiniband); UverbsFiles
	// counts the ones this process can open (/dev/infiniband/uverbsN).
	Devices     []string `json:"rdma_devices"`
	UverbsFiles int      `json:"uverbs_device_files"`
	// PeerMem says whether a peer-memory module is loaded (/sys/module, /proc/modules):
	// PeerMemModule is its name, nvidia_peermem or the older nv_peer_mem.
	PeerMem       bool   `json:"peermem"`
	PeerMemModule string `json:"peermem_module,omitempty"`
	// Kernel is the kernel release (/proc/sys/kernel/osrelease); KernelDmaBufMR whether it
	// is 5.12 or later, the first to register dma-bufs with RDMA devices (absent when the
	// release cannot be read).
	Kernel         string `json:"kernel,omitempty"`
	KernelDmaBufMR *bool  `json:"kernel_dmabuf_mr,omitempty"`
	// KernelConfig is CONFIG_DMA_SHARED_BUFFER as /proc/config.gz says it ("y", "m", "not
	// set"), "" when that file cannot be read (containers rarely can).
	KernelConfig string `json:"kernel_config_dma_shared_buffer,omitempty"`
	// DmaBufSysfs says /sys/kernel/dmabuf exists: the kernel's dma-buf statistics, present
	// on kernels built with them (their absence proves nothing).
	DmaBufSysfs bool `json:"dmabuf_sysfs"`
	// DmaBufDevices are the devices whose dma-buf check passed: the GPU driver exported a
	// descriptor of two chunks, which proves the kernel's dma-buf support too.
	DmaBufDevices []int `json:"dmabuf_export_devices"`
	part
}

const (
	rdmaClassDir  = "/sys/class/infiniband"
	uverbsDir     = "/dev/infiniband"
	kernelRelease = "/proc/sys/kernel/osrelease"
	kernelConfig  = "/proc/config.gz"
	dmaBufSysfs   = "/sys/kernel/dmabuf"
)

// peerMemModules are the peer-memory modules, the current one first.
var peerMemModules = []string{"nvidia_peermem", "nv_peer_mem"}

// readRDMA reads the kernel side of GPUDirect RDMA and judges it, with the results of the
// dma-buf check in doc.
func readRDMA(sys system, doc *document) *rdmaReport {
	r := &rdmaReport{Devices: []string{}, DmaBufDevices: []int{}}
	for _, c := range doc.Checks {
		if c.Check == "dma-buf" && c.Status == statusOK && c.Device != nil {
			r.DmaBufDevices = append(r.DmaBufDevices, *c.Device)
		}
	}
	if !sys.Linux() {
		r.part = part{State: stateUnknown, Diagnosis: "GPUDirect RDMA is read on Linux only"}
		return r
	}
	if names, err := sys.ReadDir(rdmaClassDir); err == nil {
		r.Devices = append(r.Devices, names...)
	}
	if names, err := sys.ReadDir(uverbsDir); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, "uverbs") {
				r.UverbsFiles++
			}
		}
	}
	r.PeerMemModule = loadedModule(sys, peerMemModules...)
	r.PeerMem = r.PeerMemModule != ""
	if b, err := sys.ReadFile(kernelRelease); err == nil {
		r.Kernel = strings.TrimSpace(string(b))
		if ok, known := atLeast(r.Kernel, 5, 12); known {
			r.KernelDmaBufMR = &ok
		}
	}
	r.KernelConfig = configValue(sys, "CONFIG_DMA_SHARED_BUFFER")
	r.DmaBufSysfs = exists(sys, dmaBufSysfs)
	r.judge(sys.Simulated())
	return r
}

// judge gives the report its state, diagnosis and remedy.
func (r *rdmaReport) judge(sim bool) {
	var dmabuf string // why the dma-buf path is not there, "" when it is
	switch {
	case len(r.DmaBufDevices) == 0:
		dmabuf = "no device exported a dma-buf (see the dma-buf check)"
	case r.KernelDmaBufMR != nil && !*r.KernelDmaBufMR:
		dmabuf = "kernel " + r.Kernel + " is older than 5.12, which first registers dma-bufs with RDMA devices"
	}
	kernel := "kernel " + r.Kernel
	if r.Kernel == "" {
		kernel = "the kernel release cannot be read; RDMA registrations of dma-bufs need 5.12 or later"
	}
	peer := "no peer-memory module (nvidia_peermem) is loaded"
	if r.PeerMem {
		peer = r.PeerMemModule + " is loaded"
	}
	nics := fmt.Sprintf("%d RDMA device(s) (%s)", len(r.Devices), strings.Join(r.Devices, ", "))
	switch {
	case len(r.Devices) == 0:
		r.part = part{State: stateNotNeeded, Diagnosis: "no RDMA device is visible (" + rdmaClassDir + "): nothing here registers GPU memory with a NIC; " + peer}
	case r.UverbsFiles == 0:
		r.part = part{State: stateProblem, Diagnosis: nics + ", but none of their device files (" + uverbsDir + "/uverbsN) is here",
			Remedy: fix{do: "give the process the RDMA devices: in a container, the device files ({cmd}) and the RDMA device plugin's resource", cmd: "--device=/dev/infiniband"}.text(sim)}
	case dmabuf == "":
		d := nics + ": GPU memory registers through dma-buf (exported on devices " + joinInts(r.DmaBufDevices) + "; " + kernel + ")"
		if r.PeerMem {
			d += "; " + peer + " too"
		}
		r.part = part{State: stateOK, Diagnosis: d}
	case r.PeerMem:
		r.part = part{State: stateOK, Diagnosis: nics + ": GPU memory registers through " + r.PeerMemModule +
			" (VMM memory must be made GPUDirect RDMA capable); not through dma-buf: " + dmabuf}
	default:
		r.part = part{State: stateProblem, Diagnosis: nics + ", but neither path for GPU memory: " + dmabuf + ", and " + peer,
			Remedy: fix{do: "load the peer-memory module ({cmd}), or use dma-buf: a 5.12 or later kernel and NVIDIA's open GPU kernel modules", cmd: "modprobe nvidia-peermem"}.text(sim)}
	}
}

// loadedModule returns the first of names that is a loaded kernel module, or "".
func loadedModule(sys system, names ...string) string {
	mods, _ := sys.ReadFile("/proc/modules")
	for _, n := range names {
		if exists(sys, "/sys/module/"+n) {
			return n
		}
		for line := range strings.Lines(string(mods)) {
			if f := strings.Fields(line); len(f) > 0 && f[0] == n {
				return n
			}
		}
	}
	return ""
}

// atLeast reports whether a kernel release ("6.8.0-1015-aws") is at least major.minor;
// known is false when it does not start with two numbers.
func atLeast(release string, major, minor int) (ok, known bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false, false
	}
	return ma > major || ma == major && mi >= minor, true
}

// configValue is what /proc/config.gz says of a kernel option: its value, "not set", or ""
// when the file cannot be read.
func configValue(sys system, option string) string {
	z, err := sys.ReadFile(kernelConfig)
	if err != nil {
		return ""
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return ""
	}
	cfg, err := io.ReadAll(io.LimitReader(zr, 16*maxRead))
	if err != nil {
		return ""
	}
	for l := range strings.Lines(string(cfg)) {
		l = strings.TrimRight(l, "\r\n")
		if v, ok := strings.CutPrefix(l, option+"="); ok {
			return v
		}
		if l == "# "+option+" is not set" {
			return "not set"
		}
	}
	return "not set"
}

// tableRDMA writes the kernel side of GPUDirect RDMA below the checks.
func tableRDMA(b *strings.Builder, doc *document) {
	r := doc.RDMA
	if r == nil {
		return
	}
	b.WriteString("\n")
	partLine(b, 0, "gpudirect rdma", r.part, new(string))
	devs := "none"
	if len(r.Devices) > 0 {
		devs = fmt.Sprintf("%s (%d device file(s) here)", strings.Join(r.Devices, ", "), r.UverbsFiles)
	}
	kvLine(b, 2, "rdma devices", devs)
	peer := "not loaded"
	if r.PeerMem {
		peer = r.PeerMemModule + " loaded"
	}
	kvLine(b, 2, "peer memory", peer)
	k := "unknown"
	if r.Kernel != "" {
		k = r.Kernel
		if r.KernelDmaBufMR != nil && !*r.KernelDmaBufMR {
			k += " (older than 5.12: no dma-buf registrations)"
		}
	}
	if r.KernelConfig != "" {
		k += ", CONFIG_DMA_SHARED_BUFFER " + r.KernelConfig
	}
	kvLine(b, 2, "kernel", k)
	exp := "no device"
	if len(r.DmaBufDevices) > 0 {
		exp = "devices " + joinInts(r.DmaBufDevices)
	}
	kvLine(b, 2, "dma-buf export", exp)
}

// rdmaLabels are check's labels of the kernel side of GPUDirect RDMA.
func rdmaLabels(doc *document, setBool func(string, bool), l map[string]string) {
	r := doc.RDMA
	if r == nil {
		return
	}
	l["gpudirect-rdma.kernel"] = r.State
	setBool("gpudirect-rdma.peermem", r.PeerMem)
}

// promRDMA writes the kernel side of GPUDirect RDMA.
func promRDMA(p *promWriter, doc *document) {
	r := doc.RDMA
	if r == nil {
		return
	}
	p.gauge("cuvmm_gpudirect_rdma_ok", "1 when RDMA NICs can register GPU memory (through dma-buf or a peer-memory module) or none is here; the state label says which.",
		b2f(r.fine()), "state", r.State)
	p.gauge("cuvmm_peermem_loaded", "1 when a peer-memory kernel module (nvidia_peermem, nv_peer_mem) is loaded.", b2f(r.PeerMem))
}
