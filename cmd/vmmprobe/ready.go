package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// readiness is the verdict of `vmmprobe ready`: each requirement asked for, met or not.
type readiness struct {
	Ready        bool          `json:"ready"`
	Requirements []requirement `json:"requirements"`
}

type requirement struct {
	Name   string `json:"name"`
	Met    bool   `json:"met"`
	Detail string `json:"detail"`
	Remedy string `json:"remedy,omitempty"`
}

// requirements are what --require accepts (docs/vmmprobe.md says what each means), each
// with how it is judged on a checked document.
var requirements = map[string]func(doc *document) requirement{
	"vmm":      func(doc *document) requirement { return checksMet(doc, basicStages...) },
	"posix-fd": func(doc *document) requirement { return checksMet(doc, "posix-fd-ipc") },
	"fabric":   func(doc *document) requirement { return checksMet(doc, "fabric-ipc") },
	"peer":     judgePeers,
	"nvls":     judgeNVLS,
	"node":     judgeNode,
}

// defaultRequire is what ready requires without --require.
const defaultRequire = "vmm,node"

func requirementNames() []string { return slices.Sorted(maps.Keys(requirements)) }

// judgeReadiness judges each named requirement on a checked document.
func judgeReadiness(doc *document, names []string) *readiness {
	r := &readiness{Ready: true}
	for _, n := range names {
		q := requirements[n](doc)
		q.Name = n
		r.Ready = r.Ready && q.Met
		r.Requirements = append(r.Requirements, q)
	}
	return r
}

func checksMet(doc *document, checks ...string) requirement {
	if doc.Backend.InitError != "" {
		return requirement{Detail: "the CUDA driver did not initialize: " + doc.Backend.InitError, Remedy: firstRemedy(doc)}
	}
	ok, why := everyDevice(doc, checks...)
	if ok {
		return requirement{Met: true, Detail: fmt.Sprintf("%s ok on every device", strings.Join(checks, ", "))}
	}
	q := requirement{Detail: why}
	for _, c := range doc.Checks {
		// The remedy of a check asked for, or of the one it depends on.
		if c.Status != statusOK && c.Remedy != "" && slices.ContainsFunc(checks, func(x string) bool { return x == c.Check || dependsOn[x] == c.Check }) {
			q.Remedy = c.Remedy
			break
		}
	}
	return q
}

func judgePeers(doc *document) requirement {
	if len(doc.Devices) < 2 {
		q := requirement{Met: len(doc.Devices) == 1, Detail: "one device: no pair to check"}
		if !q.Met {
			q.Detail = "no device could be checked"
		}
		return q
	}
	for _, c := range doc.Checks {
		if c.Check == "peer-map" && c.Status != statusOK {
			return requirement{Detail: fmt.Sprintf("peer-map %d->%d %s: %s", *c.Device, *c.Peer, c.Status, c.Detail), Remedy: c.Remedy}
		}
	}
	return requirement{Met: true, Detail: "peer-map ok for every ordered pair"}
}

func judgeNVLS(doc *document) requirement {
	v := doc.NVLS
	if v == nil {
		return requirement{Detail: "no NVLS verdict"}
	}
	return requirement{Met: v.Verdict == verdictYes, Detail: v.Detail, Remedy: firstRemedy(doc)}
}

func judgeNode(doc *document) requirement {
	n := doc.Node
	if n == nil {
		return requirement{Detail: "the node was not read"}
	}
	var probs []string
	for _, p := range n.Problems {
		if p.State == stateProblem {
			probs = append(probs, p.Part+": "+p.Diagnosis)
		}
	}
	if len(probs) == 0 {
		d := "no problem in the fabric picture"
		if len(n.Problems) > 0 {
			d += fmt.Sprintf(" (%d degraded part(s): %s)", len(n.Problems), n.Problems[0].Diagnosis)
		}
		return requirement{Met: true, Detail: d}
	}
	return requirement{Detail: strings.Join(probs, "; "), Remedy: firstRemedy(doc)}
}

// firstRemedy is the remedy of the node's first problem, "" when it has none.
func firstRemedy(doc *document) string {
	if doc.Node != nil && len(doc.Node.Problems) > 0 {
		return doc.Node.Problems[0].Remedy
	}
	return ""
}

// renderReadiness is ready's table: the verdict, then one line per requirement with its
// remedy below when it is not met.
func renderReadiness(doc *document) []byte {
	var b strings.Builder
	r := doc.Readiness
	if doc.Backend.Simulated {
		fmt.Fprintf(&b, "SIMULATED: sim preset %q, not this machine\n", doc.Backend.Preset)
	}
	verdict := "READY"
	if !r.Ready {
		verdict = "NOT READY"
	}
	fmt.Fprintf(&b, "%s (%s)\n", verdict, backendLine(doc))
	w := 0
	for _, q := range r.Requirements {
		w = max(w, len(q.Name))
	}
	for _, q := range r.Requirements {
		met := "met"
		if !q.Met {
			met = "NOT MET"
		}
		fmt.Fprintf(&b, "  %-*s  %-7s  %s\n", w, q.Name, met, oneLine(q.Detail))
		if !q.Met && q.Remedy != "" {
			fmt.Fprintf(&b, "  %-*s  %-7s  remedy: %s\n", w, "", "", oneLine(q.Remedy))
		}
	}
	return []byte(b.String())
}
