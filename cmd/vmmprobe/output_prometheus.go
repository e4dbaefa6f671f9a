package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// renderPrometheus renders the document in the Prometheus text exposition format (0.0.4),
// for node_exporter's textfile collector: write it with --output-file into the collector's
// directory as a *.prom file (atomically, as --output-file does, which the collector needs).
// Every metric is a gauge; a metric family appears once, with its HELP and TYPE, and its
// samples together. Label values are escaped as the format requires, so nothing read from
// the node can break a line.
func renderPrometheus(doc *document) []byte {
	p := &promWriter{}
	bi := doc.Backend
	p.gauge("cuvmm_probe_info", "vmmprobe's version and what answered; always 1.", 1, "version", doc.Vmmprobe.Version, "command", doc.Command,
		"backend", bi.Name, "simulated", strconv.FormatBool(bi.Simulated), "preset", bi.Preset, "cuda_version", bi.CUDAVersion)
	if t, err := time.Parse(time.RFC3339, doc.GeneratedAt); err == nil {
		p.gauge("cuvmm_probe_timestamp_seconds", "When vmmprobe wrote this, in seconds since the epoch.", float64(t.Unix()))
	}
	p.gauge("cuvmm_cuda_ready", "1 when the CUDA driver initialized and has devices.", b2f(bi.InitError == "" && len(doc.Devices) > 0))
	p.gauge("cuvmm_devices", "Number of CUDA devices.", float64(len(doc.Devices)))

	if len(doc.Devices) > 0 {
		p.family("cuvmm_device_feature", "1 when the device's attribute says it supports the feature (what the driver claims; see cuvmm_check_ok for what worked).")
		for _, d := range doc.Devices {
			for _, f := range deviceFeatures {
				if f.metric {
					name := strings.NewReplacer(".", "_", "-", "_").Replace(f.label)
					p.sample("cuvmm_device_feature", b2f(f.has(d)), "device", strconv.Itoa(d.Index), "uuid", d.UUID, "feature", name)
				}
			}
		}
	}
	if doc.IMEX != nil {
		p.gauge("cuvmm_imex_channel_ready", "1 when this process has a usable IMEX channel.", b2f(doc.IMEX.Ready))
	}
	promNode(p, doc)
	promRDMA(p, doc)
	if len(doc.Checks) > 0 {
		p.family("cuvmm_check_ok", "1 when the check worked (vmmprobe check); the status label says what happened.")
		for _, c := range doc.Checks {
			dev, peer := "", ""
			if c.Device != nil {
				dev = strconv.Itoa(*c.Device)
			}
			if c.Peer != nil {
				peer = strconv.Itoa(*c.Peer)
			}
			p.sample("cuvmm_check_ok", b2f(c.Status == statusOK), "check", c.Check, "device", dev, "peer", peer, "status", c.Status)
		}
	}
	if s := doc.Summary; s != nil {
		p.family("cuvmm_checks", "Number of checks by status.")
		p.sample("cuvmm_checks", float64(s.OK), "status", statusOK)
		p.sample("cuvmm_checks", float64(s.Unsupported), "status", statusUnsupported)
		p.sample("cuvmm_checks", float64(s.Failed), "status", statusFailed)
		p.sample("cuvmm_checks", float64(s.Skipped), "status", statusSkipped)
	}
	return []byte(p.b.String())
}

// promNode writes the fabric picture and the NVLS verdict.
func promNode(p *promWriter, doc *document) {
	n := doc.Node
	if n == nil {
		return
	}
	p.gauge("cuvmm_nvml_available", "1 when NVML could be loaded and initialized.", b2f(n.NVML.Available))
	p.family("cuvmm_node_part_ok", "1 when the part of the node's NVLink fabric picture is ok or not needed; the state label says which.")
	for _, pt := range n.parts() {
		p.sample("cuvmm_node_part_ok", b2f(pt.fine()), "part", pt.Part, "state", pt.State)
	}
	p.gauge("cuvmm_node_problems", "Number of problems (and degraded parts) in the node's fabric picture.", float64(len(n.Problems)))
	if len(n.GPUs) > 0 {
		p.family("cuvmm_gpu_fabric_registered", "1 when NVML says the GPU completed its fabric registration without error; the state label is NVML's fabric state.")
		for _, g := range n.GPUs {
			p.sample("cuvmm_gpu_fabric_registered", b2f(g.registered), "gpu", strconv.Itoa(g.Index), "uuid", g.UUID, "state", g.FabricState, "health", g.part.State)
		}
		p.family("cuvmm_gpu_fabric_clique_info", "1 for each GPU on an NVLink fabric, with the cluster UUID and clique id NVML reports for it.")
		for _, g := range n.GPUs {
			if g.CliqueID != nil {
				p.sample("cuvmm_gpu_fabric_clique_info", 1, "gpu", strconv.Itoa(g.Index), "uuid", g.UUID, "cluster_uuid", g.ClusterUUID, "clique_id", strconv.FormatUint(uint64(*g.CliqueID), 10))
			}
		}
	}
	if c := n.Clique; c.Value != "" {
		p.gauge("cuvmm_node_clique_info", "1 with the node's NVLink clique (cluster UUID.clique id) by GPU feature discovery's rule; unique is false for a clique id unrelated racks share.",
			1, "clique", c.Value, "unique", strconv.FormatBool(c.Unique))
	}
	if v := doc.NVLS; v != nil {
		p.family("cuvmm_nvls_verdict", "1 for the NVLS verdict that holds (yes, no or unknown); exercised says whether --unsafe-multicast proved it.")
		for _, s := range []string{verdictYes, verdictNo, verdictUnknown} {
			p.sample("cuvmm_nvls_verdict", b2f(v.Verdict == s), "verdict", s, "exercised", strconv.FormatBool(v.Exercised))
		}
	}
}

// promWriter writes metric families in the text format.
type promWriter struct{ b strings.Builder }

// family starts a family: its HELP, escaped (backslash and line feed), and its TYPE.
func (p *promWriter) family(name, help string) {
	help = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help)
	fmt.Fprintf(&p.b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
}

// gauge writes a family of one sample.
func (p *promWriter) gauge(name, help string, v float64, labels ...string) {
	p.family(name, help)
	p.sample(name, v, labels...)
}

// sample writes one sample; labels are name, value pairs (empty values are left out).
func (p *promWriter) sample(name string, v float64, labels ...string) {
	p.b.WriteString(name)
	var parts []string
	for i := 0; i+1 < len(labels); i += 2 {
		if labels[i+1] == "" {
			continue
		}
		parts = append(parts, labels[i]+`="`+escapeLabel(labels[i+1])+`"`)
	}
	if len(parts) > 0 {
		p.b.WriteString("{" + strings.Join(parts, ",") + "}")
	}
	p.b.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
}

// escapeLabel escapes a label value: backslash, double quote and line feed. The exposition
// format is UTF-8, and a scraper refuses a whole page over one invalid byte, so those become
// U+FFFD (the values come from NVML and the driver, which vmmprobe does not vouch for).
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(strings.ToValidUTF8(s, "\uFFFD"))
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
