package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
)

// schemaVersion is the version of the JSON document, documented in docs/vmmprobe.md. It
// changes only when a field is removed, renamed or changes meaning; new fields keep it.
const schemaVersion = 1

// document is everything vmmprobe reports; every output format renders one. The JSON field
// names are the stable schema.
type document struct {
	SchemaVersion int    `json:"schema_version"`
	Command       string `json:"command"` // "report", "check", "env" or "ready"
	// Vmmprobe is the program that wrote the document, GeneratedAt when (RFC 3339, UTC).
	Vmmprobe    programInfo   `json:"vmmprobe"`
	GeneratedAt string        `json:"generated_at"`
	Backend     backendInfo   `json:"backend"`
	Devices     []deviceInfo  `json:"devices"`
	Peers       []peerInfo    `json:"peers,omitempty"`
	IMEX        *imexState    `json:"imex,omitempty"`
	Node        *nodeReport   `json:"node,omitempty"`
	Symbols     *symbolReport `json:"symbols,omitempty"`
	Checks      []checkResult `json:"checks,omitempty"`
	// RDMA is the kernel side of GPUDirect RDMA (check): NICs, nvidia_peermem, dma-buf.
	RDMA    *rdmaReport `json:"gpudirect_rdma,omitempty"`
	Summary *summary    `json:"summary,omitempty"`
	// NVLS is whether NVLink SHARP would work here, from the fabric state and the
	// attributes (and, with --unsafe-multicast, the multicast check).
	NVLS *nvlsVerdict `json:"nvls,omitempty"`
	// Settings are what a job on this node should set (env).
	Settings []setting `json:"settings,omitempty"`
	// Readiness is the verdict of ready.
	Readiness *readiness `json:"readiness,omitempty"`
	// Errors are queries that failed while building the report (the report is still
	// printed; what could not be read is shown as unsupported).
	Errors []string `json:"errors,omitempty"`
}

// programInfo names the vmmprobe that wrote a document (package internal/buildinfo).
type programInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
}

// backendInfo says what answered: the real driver or the simulator.
type backendInfo struct {
	Name      string `json:"name"` // "cuda" or "sim"
	Simulated bool   `json:"simulated"`
	// Preset is the sim preset ("" for the real driver).
	Preset string `json:"preset,omitempty"`
	// Fallback is why --backend=auto fell back to sim: the driver's load error. Only the
	// table output ever falls back, so JSON never carries it; it is here for the table.
	Fallback    string `json:"-"`
	LibraryPath string `json:"library_path,omitempty"`
	// InitError is why the driver, which loaded, could not be initialized (cuInit's error,
	// such as CUDA_ERROR_SYSTEM_NOT_READY while Fabric Manager is down).
	InitError string `json:"init_error,omitempty"`
	// DriverVersion is the CUDA version the driver supports, 1000*major + 10*minor.
	DriverVersion int    `json:"driver_version"`
	CUDAVersion   string `json:"cuda_version"` // "13.0"
}

type deviceInfo struct {
	Backend           string `json:"backend"`
	Index             int    `json:"index"`
	Name              string `json:"name"`
	UUID              string `json:"uuid"`
	PCIBusID          string `json:"pci_bus_id"`
	ComputeCapability string `json:"compute_capability"`
	TotalMemory       uint64 `json:"total_memory_bytes"`

	VMM                  bool          `json:"vmm"`
	HandleTypes          handleTypes   `json:"handle_types"`
	Multicast            multicastInfo `json:"multicast"`
	GenericCompression   bool          `json:"generic_compression"`
	GPUDirectRDMAWithVMM bool          `json:"gpudirect_rdma_with_vmm"`
	// DmaBuf is CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: the device can export its memory as
	// dma-buf descriptors (what RDMA NICs register; Linux only).
	DmaBuf      bool `json:"dma_buf"`
	HostVMM     bool `json:"host_vmm"`
	HostNUMAVMM bool `json:"host_numa_vmm"`
	// HostNUMAID is the host NUMA node closest to the device, -1 when there is none or the
	// driver does not say.
	HostNUMAID  int         `json:"host_numa_id"`
	Granularity granularity `json:"granularity"`
	// Errors are attribute or granularity queries that failed for this device.
	Errors []string `json:"errors,omitempty"`
}

type handleTypes struct {
	PosixFD  bool `json:"posix_fd"`
	Win32    bool `json:"win32"`
	Win32KMT bool `json:"win32_kmt"`
	Fabric   bool `json:"fabric"`
}

type multicastInfo struct {
	Supported bool `json:"supported"`
	// Granularity of multicast objects spanning every multicast-capable device; zero where
	// multicast is unsupported.
	GranularityMin         uint64 `json:"granularity_min_bytes,omitempty"`
	GranularityRecommended uint64 `json:"granularity_recommended_bytes,omitempty"`
}

type granularity struct {
	Min         uint64 `json:"min_bytes"`
	Recommended uint64 `json:"recommended_bytes"`
}

// peerInfo is one ordered pair of devices: can Device access Peer's memory.
type peerInfo struct {
	Backend       string `json:"backend"`
	Device        int    `json:"device"`
	Peer          int    `json:"peer"`
	Access        bool   `json:"access"`
	NativeAtomics bool   `json:"native_atomics"`
	// PerformanceRank is the driver's relative rank of the link (lower is faster).
	PerformanceRank int `json:"performance_rank"`
}

// gather builds the report of the opened backend and of the node sys describes. It fails
// only when there is no device to report (errNoDevice) or the device count cannot be read;
// a driver that refused to initialize (sel.initErr) gives a report without devices.
func gather(sel *opened, sys system, command string, meta programInfo, now time.Time) (*document, error) {
	doc := &document{SchemaVersion: schemaVersion, Command: command, Vmmprobe: meta,
		GeneratedAt: now.UTC().Format(time.RFC3339), Backend: sel.info, Devices: []deviceInfo{}}
	// A driver that did not initialize still says its version, without cuInit; a simulated
	// one, its configuration's.
	v, err := sel.cfg.DriverVersion, error(nil)
	switch {
	case sel.b != nil:
		v, err = sel.b.DriverVersion()
	case !sel.info.Simulated:
		v, err = cu.DriverVersion()
	}
	if err != nil {
		doc.Errors = append(doc.Errors, "driver version: "+errText(err))
	} else {
		doc.Backend.DriverVersion = v
		doc.Backend.CUDAVersion = strconv.Itoa(v/1000) + "." + strconv.Itoa(v%1000/10)
	}
	if sel.b != nil {
		if err := gatherDevices(sel.b, doc); err != nil {
			return nil, err
		}
	}
	doc.IMEX = readIMEX(sys)
	doc.Node = readNode(sys, doc.IMEX, doc.Devices, sel.initErr)
	return doc, nil
}

// gatherDevices reads the devices, peers and symbols of b into doc.
func gatherDevices(b vmm.Backend, doc *document) error {
	n, err := b.DeviceCount()
	if err != nil {
		if errors.Is(err, cu.ERROR_NO_DEVICE) {
			return fmt.Errorf("%w: %s", errNoDevice, errText(err))
		}
		return fmt.Errorf("device count: %w", err)
	}
	if n == 0 {
		return errNoDevice
	}
	for i := range n {
		doc.Devices = append(doc.Devices, deviceReport(b, i))
	}
	fillMulticastGranularity(b, doc)
	for i := range n {
		for j := range n {
			if i != j {
				doc.Peers = append(doc.Peers, peerReport(b, i, j, &doc.Errors))
			}
		}
	}
	doc.Symbols = symbolsOf(b)
	return nil
}

var errNoDevice = errors.New("no CUDA device")

func deviceReport(b vmm.Backend, i int) deviceInfo {
	d := deviceInfo{Backend: b.Name(), Index: i, HostNUMAID: -1}
	fail := func(what string, err error) {
		d.Errors = append(d.Errors, what+": "+errText(err))
	}
	if di, err := b.Device(i); err != nil {
		fail("device", err)
	} else {
		d.Name = di.Name
		d.UUID = di.UUID.String()
		d.PCIBusID = di.PCIBusID
		d.ComputeCapability = strconv.Itoa(di.ComputeMajor) + "." + strconv.Itoa(di.ComputeMinor)
		d.TotalMemory = di.TotalMem
	}
	flag := func(a cu.DeviceAttribute) bool {
		v, err := b.Attribute(i, a)
		if err != nil {
			fail(a.String(), err)
			return false
		}
		return v != 0
	}
	d.VMM = flag(cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
	d.HandleTypes = handleTypes{
		PosixFD:  flag(cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED),
		Win32:    flag(cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED),
		Win32KMT: flag(cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED),
		Fabric:   flag(cu.DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED),
	}
	d.Multicast.Supported = flag(cu.DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED)
	d.GenericCompression = flag(cu.DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED)
	d.GPUDirectRDMAWithVMM = flag(cu.DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)
	d.DmaBuf = flag(cu.DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
	d.HostVMM = flag(cu.DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
	d.HostNUMAVMM = flag(cu.DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
	if d.HostNUMAVMM {
		if v, err := b.Attribute(i, cu.DEVICE_ATTRIBUTE_HOST_NUMA_ID); err == nil && v >= 0 {
			d.HostNUMAID = v
		}
	}
	if d.VMM {
		m := vmm.New(b)
		var err error
		if d.Granularity.Min, err = m.Granularity(vmm.DeviceProps(i), false); err != nil {
			fail("granularity", err)
		}
		if d.Granularity.Recommended, err = m.Granularity(vmm.DeviceProps(i), true); err != nil {
			fail("granularity", err)
		}
	}
	return d
}

// fillMulticastGranularity asks for the granularity of a multicast object spanning every
// multicast-capable device. It is a query: no multicast object is created.
func fillMulticastGranularity(b vmm.Backend, doc *document) {
	devs := multicastDevices(doc.Devices)
	if len(devs) == 0 {
		return
	}
	prop := cu.MulticastObjectProp{NumDevices: uint32(len(devs)), Size: size(doc.Devices[devs[0]])}
	var g [2]uint64
	for k, opt := range []cu.MulticastGranularityFlags{cu.MULTICAST_GRANULARITY_MINIMUM, cu.MULTICAST_GRANULARITY_RECOMMENDED} {
		var err error
		if g[k], err = b.MulticastGranularity(&prop, opt); err != nil {
			doc.Errors = append(doc.Errors, "multicast granularity: "+errText(err))
			return
		}
	}
	for _, i := range devs {
		doc.Devices[i].Multicast.GranularityMin, doc.Devices[i].Multicast.GranularityRecommended = g[0], g[1]
	}
}

// multicastDevices are the devices whose attribute says multicast is supported.
func multicastDevices(devs []deviceInfo) []int {
	mc := []int{}
	for _, d := range devs {
		if d.Multicast.Supported {
			mc = append(mc, d.Index)
		}
	}
	return mc
}

func peerReport(b vmm.Backend, i, j int, errs *[]string) peerInfo {
	p := peerInfo{Backend: b.Name(), Device: i, Peer: j}
	var err error
	if p.Access, err = b.CanAccessPeer(i, j); err != nil {
		*errs = append(*errs, fmt.Sprintf("peer access %d->%d: %s", i, j, errText(err)))
	}
	if v, err := b.P2PAttribute(cu.DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, i, j); err == nil {
		p.NativeAtomics = v != 0
	}
	if v, err := b.P2PAttribute(cu.DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, i, j); err == nil {
		p.PerformanceRank = v
	}
	return p
}

// errText is an error as the report shows it: the message, which for driver errors names
// the call and the CUDA_ERROR_ result.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// driverReason is why the driver did not load, for people: the loader's error with each
// path named once (dlerror already starts with the path the loader passed it).
func driverReason(err error) string {
	var le *loader.LoadError
	if !errors.As(err, &le) || le.Platform != "" || len(le.Tried) != len(le.Reasons) {
		return oneLine(errText(err))
	}
	what := "the CUDA driver"
	if le.Library != "" {
		what = "the " + le.Library
	}
	parts := make([]string, len(le.Tried))
	for i, p := range le.Tried {
		parts[i] = p + ": " + strings.TrimPrefix(le.Reasons[i], p+": ")
	}
	return oneLine("cannot load " + what + ": " + strings.Join(parts, "; "))
}

// oneLine flattens a multi-line message for a one-line notice.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// resultName is the CUDA_ERROR_ name a driver error carries, or "".
func resultName(err error) string {
	if r, ok := cu.ResultOf(err); ok {
		return r.Name()
	}
	return ""
}
