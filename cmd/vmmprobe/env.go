package main

import (
	"fmt"
	"strings"
)

// setting is one environment variable a job on this node should set, and why. An empty
// Value means: leave it unset (the library's own detection is right here).
type setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Rule names the decision rule (docs/vmmprobe.md, "vmmprobe env"), Reason says what
	// on this node decided it.
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// handleTypeVar is the variable through which env tells a job which shareable handle type
// to request for memory it shares (cu.MEM_HANDLE_TYPE_FABRIC or _POSIX_FILE_DESCRIPTOR);
// nothing in cuvmm reads it: it is for the job's own code.
const handleTypeVar = "VMMPROBE_HANDLE_TYPE"

// decideSettings applies env's decision rules to a checked document. Every rule rests on
// what was proven (the checks) or read (the NVLS verdict), never on an attribute alone:
// attributes are what fleets find lying (vllm-project/vllm#43134).
func decideSettings(doc *document) []setting {
	vmmOK, vmmWhy := everyDevice(doc, basicStages...)
	fdOK, fdWhy := everyDevice(doc, "posix-fd-ipc")
	fabOK, fabWhy := everyDevice(doc, "fabric-ipc")

	// cumem: NCCL allocates its buffers with cuMem* and shares them between the processes
	// of a node as POSIX file descriptors when NCCL_CUMEM_ENABLE=1.
	cumem := setting{"NCCL_CUMEM_ENABLE", "1", "cumem", "VMM and POSIX file descriptor sharing work on every device (checks create to teardown and posix-fd-ipc)"}
	switch {
	case !vmmOK:
		cumem.Value, cumem.Reason = "0", "VMM does not work on every device: "+vmmWhy
	case !fdOK:
		cumem.Value, cumem.Reason = "0", "memory cannot be shared between processes as POSIX file descriptors: "+fdWhy
	}

	// nvls: NVLink SHARP needs multicast objects, which need a registered fabric.
	nvls := setting{"NCCL_NVLS_ENABLE", "0", "nvls", "no NVLS verdict"}
	if v := doc.NVLS; v != nil {
		nvls.Reason = v.Detail
		if v.Verdict == verdictYes {
			nvls.Value = "1"
		}
	}

	// mnnvl: multi-node NVLink shares memory as fabric handles through IMEX.
	mnnvl := setting{"NCCL_MNNVL_ENABLE", "", "mnnvl", "fabric handles work across processes on every device (check fabric-ipc): NCCL's own detection decides"}
	if !fabOK {
		mnnvl.Value, mnnvl.Reason = "0", "fabric handles do not work across processes: "+fabWhy
	}

	// handle: what to request for memory that other processes import.
	handle := setting{handleTypeVar, "none", "handle", "no handle type works across processes on every device: " + fdWhy}
	switch {
	case fabOK:
		handle.Value, handle.Reason = "fabric", "fabric handles work across processes on every device (check fabric-ipc); they also cross nodes of an IMEX domain"
	case fdOK:
		handle.Value, handle.Reason = "posix_fd", "POSIX file descriptors work across processes on every device (check posix-fd-ipc); fabric handles do not: "+fabWhy
	}
	return []setting{cumem, nvls, mnnvl, handle}
}

// dependsOn names the check whose result a check needs (and is skipped without).
var dependsOn = map[string]string{"posix-fd-ipc": "posix-fd-export", "fabric-ipc": "fabric"}

// everyDevice reports whether every device ran each named check ok, and if not, the first
// that did not, as "device N: CHECK STATUS: DETAIL".
func everyDevice(doc *document, checks ...string) (bool, string) {
	if len(doc.Devices) == 0 {
		return false, "no device could be checked"
	}
	ok := map[[2]any]checkResult{}
	for _, r := range doc.Checks {
		if r.Device != nil && r.Peer == nil {
			ok[[2]any{*r.Device, r.Check}] = r
		}
	}
	for _, d := range doc.Devices {
		for _, name := range checks {
			r, ran := ok[[2]any{d.Index, name}]
			// A check skipped for want of the one before it is explained by that one.
			if dep, has := dependsOn[name]; has && ran && r.Status == statusSkipped {
				if first, ok := ok[[2]any{d.Index, dep}]; ok && first.Status != statusOK {
					r, name = first, dep
				}
			}
			switch {
			case !ran:
				return false, fmt.Sprintf("device %d: %s did not run", d.Index, name)
			case r.Status != statusOK:
				return false, strings.TrimSuffix(fmt.Sprintf("device %d: %s %s: %s", d.Index, name, r.Status, r.Detail), ": ")
			}
		}
	}
	return true, ""
}

// renderShell writes the settings as lines a POSIX shell can eval: a comment with each
// rule's reason, then the export (or, for a variable to leave unset, a comment saying so).
// Values are vmmprobe's own words and digits, never text read from the node; a reason may
// quote the node (a file name, a driver message), so it is flattened to one comment line.
func renderShell(doc *document) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# vmmprobe %s env, %s: settings for jobs on this node (%s)\n", doc.Vmmprobe.Version, doc.GeneratedAt, backendLine(doc))
	if doc.Backend.Simulated {
		fmt.Fprintf(&b, "# SIMULATED: these settings describe sim preset %q, not this machine\n", doc.Backend.Preset)
	}
	for _, s := range doc.Settings {
		fmt.Fprintf(&b, "# %s (rule %s): %s\n", s.Name, s.Rule, oneLine(s.Reason))
		if s.Value == "" {
			fmt.Fprintf(&b, "# %s left unset\n", s.Name)
			continue
		}
		fmt.Fprintf(&b, "export %s=%s\n", s.Name, s.Value)
	}
	return []byte(b.String())
}

// backendLine says in a few words what answered.
func backendLine(doc *document) string {
	bi := doc.Backend
	s := bi.Name + " backend"
	if bi.Simulated {
		s = "sim preset " + bi.Preset
	}
	return fmt.Sprintf("%s, %d device(s)", s, len(doc.Devices))
}
