package main

import (
	"fmt"
	"strings"

	"github.com/cuvmm/cuvmm/internal/units"
)

// renderTable renders the document for people: the report, and with check the results.
func renderTable(doc *document) []byte {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	kv := func(indent int, key, format string, a ...any) {
		w("%s%-*s %s\n", strings.Repeat(" ", indent), 26-indent, key, fmt.Sprintf(format, a...))
	}

	bi := doc.Backend
	if bi.Simulated {
		w("SIMULATED: sim preset %q, not a real machine; nothing below was measured on this node\n", bi.Preset)
		if bi.Fallback != "" {
			// The reason is in the notice on stderr: printed once.
			w("(no CUDA driver could be loaded; the reason is on stderr)\n")
		}
		w("\n")
	}
	switch {
	case bi.Simulated:
		kv(0, "backend", "sim (preset %s)", bi.Preset)
	case bi.LibraryPath != "":
		kv(0, "backend", "%s (%s)", bi.Name, bi.LibraryPath)
	default:
		kv(0, "backend", "%s", bi.Name)
	}
	if bi.CUDAVersion != "" {
		kv(0, "driver", "CUDA %s (%d)", bi.CUDAVersion, bi.DriverVersion)
	}
	if bi.InitError != "" {
		kv(0, "cuInit", "FAILED: %s", oneLine(bi.InitError))
	}
	kv(0, "devices", "%d", len(doc.Devices))

	if doc.Command != cmdReport {
		for _, d := range doc.Devices {
			kv(2, fmt.Sprintf("device %d", d.Index), "%s, %s, compute %s, %s", d.Name, d.UUID, d.ComputeCapability, gib(d.TotalMemory))
		}
		tableChecks(&b, doc)
		tableRDMA(&b, doc)
		tableNodeProblems(&b, doc)
		return []byte(b.String())
	}

	for _, d := range doc.Devices {
		w("\ndevice %d: %s\n", d.Index, d.Name)
		kv(2, "uuid", "%s", d.UUID)
		kv(2, "pci bus id", "%s", d.PCIBusID)
		kv(2, "compute capability", "%s", d.ComputeCapability)
		kv(2, "memory", "%s (%d bytes)", gib(d.TotalMemory), d.TotalMemory)
		kv(2, "vmm", "%s", yn(d.VMM))
		kv(2, "handle types", "posix-fd %s, win32 %s, win32-kmt %s, fabric %s",
			yn(d.HandleTypes.PosixFD), yn(d.HandleTypes.Win32), yn(d.HandleTypes.Win32KMT), yn(d.HandleTypes.Fabric))
		if d.Multicast.Supported && d.Multicast.GranularityMin > 0 {
			kv(2, "multicast", "yes (granularity %s, recommended %s)",
				units.Size(d.Multicast.GranularityMin), units.Size(d.Multicast.GranularityRecommended))
		} else {
			kv(2, "multicast", "%s", yn(d.Multicast.Supported))
		}
		kv(2, "generic compression", "%s", yn(d.GenericCompression))
		kv(2, "gpudirect rdma with vmm", "%s", yn(d.GPUDirectRDMAWithVMM))
		kv(2, "dma-buf", "%s", yn(d.DmaBuf))
		kv(2, "host vmm", "%s", yn(d.HostVMM))
		if d.HostNUMAVMM && d.HostNUMAID >= 0 {
			kv(2, "host numa vmm", "yes (node %d)", d.HostNUMAID)
		} else {
			kv(2, "host numa vmm", "%s", yn(d.HostNUMAVMM))
		}
		if d.Granularity.Min > 0 {
			kv(2, "granularity", "%s (recommended %s)", units.Size(d.Granularity.Min), units.Size(d.Granularity.Recommended))
		} else {
			kv(2, "granularity", "-")
		}
		for _, e := range d.Errors {
			kv(2, "error", "%s", e)
		}
	}

	if x := doc.IMEX; x != nil {
		w("\nimex channels\n")
		if x.Major > 0 {
			kv(2, "/proc/devices", "%s, major %d", imexProcName, x.Major)
		} else {
			kv(2, "/proc/devices", "%s not listed", imexProcName)
		}
		kv(2, "NVreg_ImexChannelCount", "%s", optInt(x.ChannelCount))
		kv(2, "NVreg_CreateImexChannel0", "%s", optBool(x.CreateChannel0))
		if x.DirPresent {
			kv(2, imexChannelDir, "%d channel file(s)", x.ChannelFiles)
		} else {
			kv(2, imexChannelDir, "missing")
		}
		for _, c := range x.Channels {
			if c.Accessible {
				c.Problem = "accessible"
			}
			kv(4, c.Name, "%s, %s", c.Mode, c.Problem)
		}
		if x.Ready {
			kv(2, "state", "ready: %s", x.Diagnosis)
		} else {
			kv(2, "state", "not ready: %s", x.Diagnosis)
			kv(2, "remedy", "%s", x.Remedy)
		}
	}

	tableNode(&b, doc)

	if len(doc.Devices) > 1 {
		w("\npeer access (row device can access column device's memory)\n")
		access := map[[2]int]bool{}
		for _, p := range doc.Peers {
			access[[2]int{p.Device, p.Peer}] = p.Access
		}
		w("      ")
		for j := range doc.Devices {
			w(" %4d", j)
		}
		w("\n")
		for i := range doc.Devices {
			w("  %4d", i)
			for j := range doc.Devices {
				v := "-"
				if i != j {
					v = yn(access[[2]int{i, j}])
				}
				w(" %4s", v)
			}
			w("\n")
		}
	}

	if s := doc.Symbols; s != nil {
		w("\ndriver symbols\n")
		sym := func(name string, set symbolSet) {
			n := len(set.Resolved) + len(set.Missing)
			if set.complete() {
				kv(2, name, "all %d resolved", n)
				return
			}
			var miss []string
			for _, m := range set.Missing {
				miss = append(miss, m.Name+" ("+m.Reason+")")
			}
			kv(2, name, "%d of %d resolved; missing: %s", len(set.Resolved), n, strings.Join(miss, ", "))
		}
		sym("vmm", s.VMM)
		sym("multicast", s.Multicast)
	}
	if len(doc.Errors) > 0 {
		w("\n")
		for _, e := range doc.Errors {
			kv(0, "error", "%s", e)
		}
	}
	return []byte(b.String())
}

// tableChecks writes the check results: one row each, with the error and remedy of
// unsupported and failed checks on the lines below.
func tableChecks(b *strings.Builder, doc *document) {
	if len(doc.Checks) == 0 {
		return
	}
	where := make([]string, len(doc.Checks)) // the device, the pair, or all
	wWhere, wCheck, wStatus := len("DEVICE"), len("CHECK"), len("STATUS")
	for i, r := range doc.Checks {
		switch {
		case r.Device != nil && r.Peer != nil:
			where[i] = fmt.Sprintf("%d->%d", *r.Device, *r.Peer)
		case r.Device != nil:
			where[i] = fmt.Sprint(*r.Device)
		default:
			where[i] = "all"
		}
		wWhere, wCheck, wStatus = max(wWhere, len(where[i])), max(wCheck, len(r.Check)), max(wStatus, len(r.Status))
	}
	line := func(where, check, status, detail string) {
		fmt.Fprintf(b, "%s\n", strings.TrimRight(fmt.Sprintf("%-*s  %-*s  %-*s  %s", wWhere, where, wCheck, check, wStatus, status, detail), " "))
	}
	b.WriteString("\n")
	line("DEVICE", "CHECK", "STATUS", "DETAIL")
	pad := strings.Repeat(" ", wWhere+wCheck+wStatus+6)
	for i, r := range doc.Checks {
		line(where[i], r.Check, r.Status, r.Detail)
		if r.Error != "" {
			fmt.Fprintf(b, "%serror: %s\n", pad, r.Error)
		}
		if r.Remedy != "" {
			fmt.Fprintf(b, "%sremedy: %s\n", pad, r.Remedy)
		}
	}
	if s := doc.Summary; s != nil {
		fmt.Fprintf(b, "\n%d ok, %d unsupported, %d failed, %d skipped\n", s.OK, s.Unsupported, s.Failed, s.Skipped)
	}
}

func yn(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

func optInt(p *int) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprint(*p)
}

func optBool(p *bool) string {
	if p == nil {
		return "unknown"
	}
	if *p {
		return "1"
	}
	return "0"
}

// kvLine writes one key-value line of the table.
func kvLine(b *strings.Builder, indent int, key, value string) {
	fmt.Fprintf(b, "%s%-*s %s\n", strings.Repeat(" ", indent), 26-indent, key, value)
}

// partLine is a part of the node: its state and diagnosis, and its remedy below when it
// has one that the line before did not already give (eight GPUs that no Fabric Manager
// registered have one remedy).
func partLine(b *strings.Builder, indent int, name string, p part, lastRemedy *string) {
	kvLine(b, indent, name, strings.ReplaceAll(p.State, "-", " ")+": "+oneLine(p.Diagnosis))
	switch {
	case p.Remedy == "" || p.fine():
	case p.Remedy == *lastRemedy:
		kvLine(b, indent+2, "remedy", "the same")
	default:
		kvLine(b, indent+2, "remedy", oneLine(p.Remedy))
		*lastRemedy = p.Remedy
	}
}

// tableNode writes the fabric picture and the NVLS verdict.
func tableNode(b *strings.Builder, doc *document) {
	n := doc.Node
	if n == nil {
		return
	}
	b.WriteString("\nnvlink fabric\n")
	var last string
	for _, p := range n.parts() {
		partLine(b, 2, strings.ReplaceAll(p.Part, "_", " "), p.part, &last)
		if p.Part == "nvml" && n.NVML.Library != "" && n.NVML.Available {
			kvLine(b, 4, "library", n.NVML.Library)
		}
	}
	for _, p := range n.Problems {
		if p.Part == "imex_channels" {
			partLine(b, 2, "imex channels", p.part, &last)
		}
	}
	for _, g := range n.GPUs {
		name := fmt.Sprintf("gpu %d", g.Index)
		if g.CUDADevice != nil && *g.CUDADevice != g.Index {
			name += fmt.Sprintf(" (device %d)", *g.CUDADevice)
		}
		partLine(b, 2, name, g.part, &last)
		var facts []string
		if g.FabricState != "" {
			facts = append(facts, "state "+g.FabricState)
		}
		if g.Status != "" {
			facts = append(facts, "status "+g.Status)
		}
		if g.Summary != "" {
			facts = append(facts, "health "+g.Summary)
		}
		if g.LinksTotal != nil {
			facts = append(facts, fmt.Sprintf("%d/%d nvlinks active", *g.LinksActive, *g.LinksTotal))
		}
		if len(facts) > 0 {
			kvLine(b, 4, "fabric", strings.Join(facts, ", "))
		}
	}
	if c := n.Clique; c.Value != "" {
		kvLine(b, 2, "clique", c.Value+" ("+oneLine(c.Why)+")")
	} else {
		kvLine(b, 2, "clique", "none: "+oneLine(c.Why))
	}
	if v := doc.NVLS; v != nil {
		b.WriteString("\n")
		kvLine(b, 0, "nvls", v.Verdict+": "+oneLine(v.Detail))
	}
}

// tableNodeProblems writes, below the checks, what is wrong with the node and the NVLS
// verdict: the short form of tableNode.
func tableNodeProblems(b *strings.Builder, doc *document) {
	if n := doc.Node; n != nil {
		b.WriteString("\n")
		if len(n.Problems) == 0 {
			kvLine(b, 0, "nvlink fabric", "no problem ("+oneLine(n.FabricManager.Diagnosis)+")")
		} else {
			kvLine(b, 0, "nvlink fabric", fmt.Sprintf("%d problem(s)", len(n.Problems)))
		}
		var last string
		for _, p := range n.Problems {
			partLine(b, 2, strings.ReplaceAll(p.Part, "_", " "), p.part, &last)
		}
	}
	if v := doc.NVLS; v != nil {
		kvLine(b, 0, "nvls", v.Verdict+": "+oneLine(v.Detail))
	}
}
