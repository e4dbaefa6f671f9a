package main

import (
	"fmt"
	"strings"
)

// nvlsVerdict says whether NVLink SHARP (NVLS: NCCL's collectives over NVSwitch multicast)
// would work on this node. Without --unsafe-multicast it is inferred, never exercised:
// from the devices' MULTICAST_SUPPORTED attribute, the driver's multicast entry points, and
// NVML's fabric state of each multicast-capable GPU (registered: state COMPLETED, status
// NVML_SUCCESS, as TensorRT-LLM gates NVLS, NVIDIA/TensorRT-LLM#16595) and its health.
type nvlsVerdict struct {
	// Verdict is "yes", "no" or "unknown" (what decides it cannot be read).
	Verdict string `json:"verdict"`
	// Devices are the CUDA devices whose attribute says multicast is supported.
	Devices []int `json:"devices"`
	// Reasons are the rules that decided, for people.
	Reasons []string `json:"reasons"`
	// Exercised is true only when --unsafe-multicast created a multicast object.
	Exercised bool   `json:"exercised"`
	Detail    string `json:"detail"`
}

const (
	verdictYes     = "yes"
	verdictNo      = "no"
	verdictUnknown = "unknown"
)

// decideNVLS applies the NVLS rules to a document (after the checks, when they ran).
func decideNVLS(doc *document) *nvlsVerdict {
	v := &nvlsVerdict{Verdict: verdictYes, Devices: multicastDevices(doc.Devices), Reasons: []string{}}
	no := func(r string) { v.Verdict = verdictNo; v.Reasons = append(v.Reasons, r) }
	unknown := func(r string) {
		if v.Verdict == verdictYes {
			v.Verdict = verdictUnknown
		}
		v.Reasons = append(v.Reasons, r)
	}
	switch {
	case doc.Backend.InitError != "":
		no("the CUDA driver did not initialize" + resultSuffix(doc.Backend.InitError))
	case len(v.Devices) < 2:
		no(fmt.Sprintf("NVLS needs two or more GPUs whose MULTICAST_SUPPORTED attribute is set (NVSwitch systems, Hopper and newer); this node has %d", len(v.Devices)))
	}
	if s := doc.Symbols; s != nil && !s.Multicast.complete() {
		no("the driver lacks cuMulticast* entry points (CUDA 12.1 or newer)")
	}
	if v.Verdict == verdictYes {
		v.fabric(doc, no, unknown)
	}
	if v.Verdict == verdictYes {
		v.Reasons = append(v.Reasons, fmt.Sprintf("devices %s report multicast and are registered with the NVLink fabric", joinInts(v.Devices)))
	}
	for _, c := range doc.Checks {
		if c.Check != "multicast" || c.Status == statusSkipped {
			continue
		}
		v.Exercised = true
		if c.Status != statusOK {
			no("the multicast check (--unsafe-multicast) " + c.Status + ": " + c.Detail)
		}
	}
	v.Detail = v.detail()
	return v
}

// fabric checks NVML's view of every multicast-capable device.
func (v *nvlsVerdict) fabric(doc *document, no, unknown func(string)) {
	n := doc.Node
	if n == nil || !n.NVML.Available {
		unknown("NVML is unavailable, so the GPUs' fabric registration cannot be read")
		return
	}
	for _, dev := range v.Devices {
		g := n.gpu(dev)
		switch {
		case g == nil:
			unknown(fmt.Sprintf("NVML does not list device %d (matched by UUID)", dev))
		case g.FabricState == "":
			unknown(fmt.Sprintf("device %d's fabric state is unknown: %s", dev, g.Unknown))
		case !g.registered:
			no(fmt.Sprintf("device %d is not registered with the NVLink fabric (state %s, status %s): multicast objects need Fabric Manager to have registered every GPU", dev, g.FabricState, g.Status))
		case g.part.State == stateProblem:
			no(fmt.Sprintf("device %d's fabric is unhealthy: %s", dev, g.healthText()))
		case g.part.State == stateDegraded:
			v.Reasons = append(v.Reasons, fmt.Sprintf("device %d's fabric is degraded (%s): NVLS works, slower", dev, g.healthText()))
		}
	}
}

func (v *nvlsVerdict) detail() string {
	what := map[string]string{verdictYes: "NVLS would work", verdictNo: "NVLS would not work", verdictUnknown: "whether NVLS would work cannot be told"}[v.Verdict]
	how := " (inferred, not exercised: creating a multicast object needs --unsafe-multicast): "
	if v.Exercised {
		how = ", as the multicast check (--unsafe-multicast) showed: "
	}
	return what + how + strings.Join(v.Reasons, "; ")
}

// gpu is the fabric record NVML gives for CUDA device dev, nil when none matches.
func (n *nodeReport) gpu(dev int) *gpuFabric {
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.CUDADevice != nil && *g.CUDADevice == dev {
			return g
		}
	}
	return nil
}

// resultSuffix names the CUDA_ERROR_ result an error message carries, as " (NAME)".
func resultSuffix(msg string) string {
	for _, f := range strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == ':' || r == '(' || r == ')' }) {
		if strings.HasPrefix(f, "CUDA_ERROR_") {
			return " (" + f + ")"
		}
	}
	return ""
}
