package main

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// labelPrefix is the namespace of every label.
const labelPrefix = "cuvmm.io/"

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
	every := func(f func(deviceInfo) bool) bool {
		for _, d := range doc.Devices {
			if !f(d) {
				return false
			}
		}
		return len(doc.Devices) > 0
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
		setBool("vmm", every(func(d deviceInfo) bool { return d.VMM }))
		setBool("handle.posix-fd", every(func(d deviceInfo) bool { return d.HandleTypes.PosixFD }))
		setBool("handle.win32", every(func(d deviceInfo) bool { return d.HandleTypes.Win32 }))
		setBool("handle.win32-kmt", every(func(d deviceInfo) bool { return d.HandleTypes.Win32KMT }))
		setBool("handle.fabric", every(func(d deviceInfo) bool { return d.HandleTypes.Fabric }))
		mc := every(func(d deviceInfo) bool { return d.Multicast.Supported })
		setBool("multicast", mc)
		if mc {
			setUint("multicast.granularity-min-bytes", largest(func(d deviceInfo) uint64 { return d.Multicast.GranularityMin }))
			setUint("multicast.granularity-recommended-bytes", largest(func(d deviceInfo) uint64 { return d.Multicast.GranularityRecommended }))
		}
		setBool("compression.generic", every(func(d deviceInfo) bool { return d.GenericCompression }))
		setBool("gpudirect-rdma-vmm", every(func(d deviceInfo) bool { return d.GPUDirectRDMAWithVMM }))
		setBool("dma-buf", every(func(d deviceInfo) bool { return d.DmaBuf }))
		setBool("host-vmm", every(func(d deviceInfo) bool { return d.HostVMM }))
		setBool("host-numa-vmm", every(func(d deviceInfo) bool { return d.HostNUMAVMM }))
		setUint("granularity.min-bytes", largest(func(d deviceInfo) uint64 { return d.Granularity.Min }))
		setUint("granularity.recommended-bytes", largest(func(d deviceInfo) uint64 { return d.Granularity.Recommended }))
	}
	if doc.IMEX != nil {
		setBool("imex.channel", doc.IMEX.Ready)
	}
	if len(doc.Devices) > 1 {
		all := true
		for _, p := range doc.Peers {
			all = all && p.Access
		}
		setBool("peer-access.all", all)
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

	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	if ttl > 0 {
		b.WriteString("# +expiry-time=" + now.Add(ttl).UTC().Format(time.RFC3339) + "\n")
	}
	b.WriteString("# vmmprobe " + doc.Vmmprobe.Version + " " + doc.Command + ", " + doc.GeneratedAt + "\n")
	for _, k := range keys {
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
	healthy := true
	for _, p := range n.Problems {
		healthy = healthy && p.State != stateProblem
	}
	setBool("node.healthy", healthy)
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
