package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// labelPrefix is the namespace of every label.
const labelPrefix = "cuvmm.io/"

// deviceFeatures are the device attributes the labels say every device has, by label name
// (metric: also a feature of the metric cuvmm_device_feature, named with underscores).
var deviceFeatures = []struct {
	label  string
	metric bool
	has    func(deviceInfo) bool
}{
	{"vmm", true, func(d deviceInfo) bool { return d.VMM }},
	{"handle.posix-fd", true, func(d deviceInfo) bool { return d.HandleTypes.PosixFD }},
	{"handle.win32", false, func(d deviceInfo) bool { return d.HandleTypes.Win32 }},
	{"handle.win32-kmt", false, func(d deviceInfo) bool { return d.HandleTypes.Win32KMT }},
	{"handle.fabric", true, func(d deviceInfo) bool { return d.HandleTypes.Fabric }},
	{"multicast", true, func(d deviceInfo) bool { return d.Multicast.Supported }},
	{"compression.generic", true, func(d deviceInfo) bool { return d.GenericCompression }},
	{"gpudirect-rdma-vmm", true, func(d deviceInfo) bool { return d.GPUDirectRDMAWithVMM }},
	{"dma-buf", true, func(d deviceInfo) bool { return d.DmaBuf }},
	{"host-vmm", true, func(d deviceInfo) bool { return d.HostVMM }},
	{"host-numa-vmm", true, func(d deviceInfo) bool { return d.HostNUMAVMM }},
}

// renderLabels renders the document as node labels in the format of node-feature-discovery's
// feature files (features.d): first, when ttl is set, the "# +expiry-time=" directive
// after which NFD ignores the file, so that labels age out when vmmprobe stops refreshing
// them; a comment naming the vmmprobe and the time; then one key=value line per label,
// sorted; with gfdClique, last, GPU feature discovery's nvidia.com/gpu.clique with the same
// value as cuvmm.io/gpu.clique.
//
// Booleans are "true" or "false"; a device feature is true only when every device has it.
// A number that is zero is not a label: it says nothing a scheduler could select on, and
// the label of a node that has the feature is never zero. Device labels are absent when
// no device could be read (the driver did not initialize).
func renderLabels(doc *document, ttl time.Duration, now time.Time, gfdClique bool) []byte {
	l := map[string]string{}
	setBool := func(k string, v bool) { l[k] = strconv.FormatBool(v) }
	setUint := func(k string, v uint64) {
		if v != 0 {
			l[k] = strconv.FormatUint(v, 10)
		}
	}
	largest := func(f func(deviceInfo) uint64) uint64 {
		var m uint64
		for _, d := range doc.Devices {
			m = max(m, f(d))
		}
		return m
	}

	l["backend"] = doc.Backend.Name
	setBool("simulated", doc.Backend.Simulated)
	if doc.Backend.Preset != "" {
		l["sim-preset"] = doc.Backend.Preset
	}
	if doc.Backend.CUDAVersion != "" {
		l["cuda-version"] = doc.Backend.CUDAVersion
	}
	setBool("cuda-ready", doc.Backend.InitError == "" && len(doc.Devices) > 0)
	if len(doc.Devices) > 0 {
		setUint("device-count", uint64(len(doc.Devices)))
		for _, f := range deviceFeatures {
			setBool(f.label, !slices.ContainsFunc(doc.Devices, func(d deviceInfo) bool { return !f.has(d) }))
		}
		if l["multicast"] == "true" {
			setUint("multicast.granularity-min-bytes", largest(func(d deviceInfo) uint64 { return d.Multicast.GranularityMin }))
			setUint("multicast.granularity-recommended-bytes", largest(func(d deviceInfo) uint64 { return d.Multicast.GranularityRecommended }))
		}
		setUint("granularity.min-bytes", largest(func(d deviceInfo) uint64 { return d.Granularity.Min }))
		setUint("granularity.recommended-bytes", largest(func(d deviceInfo) uint64 { return d.Granularity.Recommended }))
	}
	if doc.IMEX != nil {
		setBool("imex.channel", doc.IMEX.Ready)
	}
	if len(doc.Devices) > 1 {
		setBool("peer-access.all", !slices.ContainsFunc(doc.Peers, func(p peerInfo) bool { return !p.Access }))
	}
	if doc.Symbols != nil {
		setBool("symbols.vmm-complete", doc.Symbols.VMM.complete())
		setBool("symbols.multicast-complete", doc.Symbols.Multicast.complete())
	}
	nodeLabels(doc, setBool, l)
	rdmaLabels(doc, setBool, l)
	if doc.Summary != nil || doc.Backend.InitError != "" {
		checkLabels(doc, setBool)
	}

	var b strings.Builder
	if ttl > 0 {
		b.WriteString("# +expiry-time=" + now.Add(ttl).UTC().Format(time.RFC3339) + "\n")
	}
	b.WriteString("# vmmprobe " + doc.Vmmprobe.Version + " " + doc.Command + ", " + doc.GeneratedAt + "\n")
	for _, k := range slices.Sorted(maps.Keys(l)) {
		b.WriteString(labelPrefix + k + "=" + l[k] + "\n")
	}
	if v, ok := l["gpu.clique"]; ok && gfdClique {
		b.WriteString(gfdCliqueLabel + "=" + v + "\n")
	}
	return []byte(b.String())
}

// nodeLabels are the fabric picture's: NVML there, Fabric Manager's state, the GPUs'
// registration and health (where any GPU is on a fabric), the node without problems, and
// the NVLS verdict (absent while unknown).
func nodeLabels(doc *document, setBool func(string, bool), l map[string]string) {
	n := doc.Node
	if n == nil {
		return
	}
	setBool("nvml", n.NVML.Available)
	l["fabric-manager"] = n.FabricManager.State
	onFabric, registered, health := 0, true, stateOK
	for _, g := range n.GPUs {
		if !g.onFabric {
			continue
		}
		onFabric++
		registered = registered && g.registered
		if g.registered && g.part.State == stateProblem {
			health = stateProblem
		} else if g.part.State == stateDegraded && health == stateOK {
			health = stateDegraded
		}
	}
	if onFabric > 0 {
		setBool("fabric.registered", registered)
		if registered {
			l["fabric.health"] = health
		}
	}
	setBool("node.healthy", !slices.ContainsFunc(n.Problems, func(p problem) bool { return p.State == stateProblem }))
	if n.Clique.Value != "" {
		l["gpu.clique"] = n.Clique.Value
	}
	if v := doc.NVLS; v != nil && v.Verdict != verdictUnknown {
		setBool("nvls", v.Verdict == verdictYes)
	}
}

// checkLabels are check's: check.NAME is true when every run of the check was ok (checks
// not exercised, multicast without --unsafe-multicast, get no label); check.passed is true
// when no check failed and every device ran the whole VMM sequence, so that a node that can
// do nothing (no VMM, or a driver that did not initialize) does not pass.
func checkLabels(doc *document, setBool func(string, bool)) {
	ok := map[string]bool{}
	for _, r := range doc.Checks {
		if r.Check == "multicast" && r.Status == statusSkipped {
			continue
		}
		prev, seen := ok[r.Check]
		ok[r.Check] = (prev || !seen) && r.Status == statusOK
	}
	for name, v := range ok {
		setBool("check."+name, v)
	}
	vmmOK, _ := everyDevice(doc, basicStages...)
	setBool("check.passed", doc.Summary != nil && doc.Summary.Failed == 0 && vmmOK)
}
