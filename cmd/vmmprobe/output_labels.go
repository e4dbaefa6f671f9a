package main

import (
	"sort"
	"strconv"
	"strings"
)

// labelPrefix is the namespace of every label.
const labelPrefix = "cuvmm.io/"

// renderLabels renders the document as node labels, one key=value line each, sorted, in
// the format of node-feature-discovery's feature files (features.d). Booleans are "true"
// or "false"; a device feature is true only when every device has it.
func renderLabels(doc *document) []byte {
	l := map[string]string{}
	setBool := func(k string, v bool) { l[k] = strconv.FormatBool(v) }
	setUint := func(k string, v uint64) { l[k] = strconv.FormatUint(v, 10) }
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
	l["device-count"] = strconv.Itoa(len(doc.Devices))
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
	setBool("host-vmm", every(func(d deviceInfo) bool { return d.HostVMM }))
	setBool("host-numa-vmm", every(func(d deviceInfo) bool { return d.HostNUMAVMM }))
	setUint("granularity.min-bytes", largest(func(d deviceInfo) uint64 { return d.Granularity.Min }))
	setUint("granularity.recommended-bytes", largest(func(d deviceInfo) uint64 { return d.Granularity.Recommended }))
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
	if doc.Summary != nil {
		// check.NAME is true when every run of the check was ok. Checks that were not
		// exercised (multicast without --unsafe-multicast) get no label.
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
		setBool("check.passed", doc.Summary.Failed == 0)
	}

	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(labelPrefix + k + "=" + l[k] + "\n")
	}
	return []byte(b.String())
}
