package nvml

import "errors"

// Node is what Probe learned about a node: the preflight's view of NVML.
type Node struct {
	// Unavailable is "" when NVML was loaded and initialized. Otherwise it says why not
	// ("NVML unavailable: ..."); every fact below is then unknown for that reason, and
	// GPUs is empty.
	Unavailable string
	// Library is the file NVML was loaded from.
	Library           string
	DriverVersion     Fact[string] // "580.65.06"
	CUDADriverVersion Fact[int]    // 13000 for CUDA 13.0
	GPUCount          Fact[int]
	GPUs              []GPU // one per NVML index, when GPUCount is known
}

// GPU is one GPU of a Node.
type GPU struct {
	Index    int // NVML's index, which ignores CUDA_VISIBLE_DEVICES
	Name     Fact[string]
	UUID     Fact[string]
	PCIBusID Fact[string]
	Fabric   Fact[FabricInfo]
	NvLinks  Fact[NvLinks]
}

// NvLinks is the state of a GPU's NVLinks.
type NvLinks struct {
	Total  int // links the GPU reports a state for
	Active int
	// ToNVSwitch is whether any active link ends at an NVSwitch
	// (NVML_NVLINK_DEVICE_TYPE_SWITCH); false when no link is active.
	ToNVSwitch Fact[bool]
}

// Probe takes the snapshot of the node through NVML: it initializes NVML, reads the driver
// version and every GPU, and shuts NVML down again. Nothing stops it: a fact NVML cannot
// give is recorded as unknown with the reason, and a missing or broken NVML makes a Node
// whose Unavailable says so.
func Probe() Node { return system.probe() }

func (l *library) probe() Node {
	if err := l.init(); err != nil {
		return Node{
			Unavailable:       "NVML unavailable: " + err.Error(),
			Library:           l.path(),
			DriverVersion:     Unknown[string](err),
			CUDADriverVersion: Unknown[int](err),
			GPUCount:          Unknown[int](err),
		}
	}
	// The snapshot is complete whatever nvmlShutdown says, and there is nothing to undo.
	defer func() { _ = l.shutdown() }()

	n := Node{Library: l.path()}
	n.DriverVersion = fact(l.driverVersion())
	n.CUDADriverVersion = fact(l.cudaDriverVersion())
	n.GPUCount = fact(l.deviceCount())
	if !n.GPUCount.Known() {
		return n
	}
	n.GPUs = make([]GPU, n.GPUCount.Value)
	out := new(uint32) // the NVLink calls' out-parameter, one for all
	for i := range n.GPUs {
		n.GPUs[i] = l.probeGPU(i, out)
	}
	return n
}

func (l *library) probeGPU(i int, out *uint32) GPU {
	g := GPU{Index: i}
	d, err := l.deviceByIndex(i)
	if err != nil {
		g.Name, g.UUID, g.PCIBusID = Unknown[string](err), Unknown[string](err), Unknown[string](err)
		g.Fabric, g.NvLinks = Unknown[FabricInfo](err), Unknown[NvLinks](err)
		return g
	}
	g.Name = fact(d.Name())
	g.UUID = fact(d.UUID())
	g.PCIBusID = fact(d.PciBusID())
	g.Fabric = fact(d.GpuFabricInfo())
	g.NvLinks = fact(d.nvLinks(out))
	return g
}

// nvLinks counts the GPU's links and looks at the far end of the active ones until one is
// an NVSwitch. A link number the GPU does not have (ERROR_INVALID_ARGUMENT) or a link
// without NVLink support (ERROR_NOT_SUPPORTED) is skipped; if every link is skipped, the
// links are unknown for the first one's reason. Any other failure makes them unknown.
func (d Device) nvLinks(out *uint32) (NvLinks, error) {
	var nl NvLinks
	var skipped, remoteErr error
	toSwitch := false
	for link := range NVLINK_MAX_LINKS {
		err := d.linkCall(procDeviceGetNvLinkState, link, out, 0)
		switch {
		case errors.Is(err, ERROR_INVALID_ARGUMENT), errors.Is(err, ERROR_NOT_SUPPORTED):
			if skipped == nil {
				skipped = err
			}
			continue
		case err != nil:
			return NvLinks{}, err
		}
		nl.Total++
		if *out != nvmlFeatureEnabled {
			continue
		}
		nl.Active++
		if toSwitch {
			continue
		}
		if err := d.linkCall(procDeviceGetNvLinkRemoteDevType, link, out, uint32(NVLINK_DEVICE_TYPE_UNKNOWN)); err != nil {
			if remoteErr == nil {
				remoteErr = err
			}
		} else if NvLinkDeviceType(*out) == NVLINK_DEVICE_TYPE_SWITCH {
			toSwitch = true
		}
	}
	if nl.Total == 0 && skipped != nil {
		return NvLinks{}, skipped
	}
	switch {
	case toSwitch:
		nl.ToNVSwitch = Known(true)
	case remoteErr != nil:
		nl.ToNVSwitch = Unknown[bool](remoteErr)
	default:
		nl.ToNVSwitch = Known(false)
	}
	return nl, nil
}

// fact makes a Fact of a call's result.
func fact[T any](v T, err error) Fact[T] {
	if err != nil {
		return Unknown[T](err)
	}
	return Known(v)
}
