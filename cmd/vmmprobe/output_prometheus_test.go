package main

import (
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parsePrometheus parses text with Prometheus's own parser (github.com/prometheus/common/
// expfmt, a test-only dependency: vmmprobe writes the format itself, and
// TestPrometheusParserStaysOutOfTheBinary keeps it that way), with the legacy metric and
// label name rules that node_exporter's textfile collector and every Prometheus accept.
// The parser does not refuse two samples with one label set, which a scrape would, so that
// is checked here too.
func parsePrometheus(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err, text)
	for name, f := range fams {
		assert.Equal(t, dto.MetricType_GAUGE, f.GetType(), name)
		assert.NotEmpty(t, f.GetHelp(), name)
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := strings.Join(ls, ",")
			assert.False(t, seen[key], "%s{%s} twice", name, key)
			seen[key] = true
		}
	}
	return fams
}

// gauge is the value of the family's sample whose labels include want.
func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "no %s", name)
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no %s%v", name, want)
	return 0
}

func TestPrometheus(t *testing.T) {
	t.Parallel()
	for _, preset := range goldenPresets {
		for _, cmd := range []string{cmdReport, cmdCheck} {
			r := runWith(t, noDriver, cmd, "--backend=sim", "--preset", preset, "-o", "prometheus")
			fams := parsePrometheus(t, r.stdout)
			assert.Equal(t, 1.0, gauge(t, fams, "cuvmm_probe_info", map[string]string{"version": "test", "preset": preset}))
			assert.Equal(t, float64(testNow.Unix()), gauge(t, fams, "cuvmm_probe_timestamp_seconds", nil))
			for _, name := range []string{"cuvmm_cuda_ready", "cuvmm_devices", "cuvmm_nvml_available", "cuvmm_node_part_ok", "cuvmm_node_problems", "cuvmm_nvls_verdict"} {
				assert.Contains(t, fams, name, "%s %s", cmd, preset)
			}
			if cmd == cmdCheck && preset != "hgx8-fm-down" {
				assert.Contains(t, fams, "cuvmm_check_ok")
				assert.Contains(t, fams, "cuvmm_checks")
			}
		}
	}

	r := runWith(t, noDriver, "check", "--backend=sim", "--preset=hgx8-fm-down", "-o", "prometheus")
	fams := parsePrometheus(t, r.stdout)
	assert.Equal(t, 0.0, gauge(t, fams, "cuvmm_cuda_ready", nil))
	assert.Equal(t, 0.0, gauge(t, fams, "cuvmm_node_part_ok", map[string]string{"part": "fabric_manager", "state": "problem"}))
	assert.Equal(t, 9.0, gauge(t, fams, "cuvmm_node_problems", nil))
	assert.Equal(t, 0.0, gauge(t, fams, "cuvmm_gpu_fabric_registered", map[string]string{"gpu": "3", "state": "not-started"}))

	r = runWith(t, noDriver, "check", "--backend=sim", "--preset=mnnvl", "-o", "prometheus")
	fams = parsePrometheus(t, r.stdout)
	if ipcSupported {
		assert.Equal(t, 1.0, gauge(t, fams, "cuvmm_check_ok", map[string]string{"check": "fabric-ipc", "device": "2", "status": "ok"}))
	}
	assert.Equal(t, 1.0, gauge(t, fams, "cuvmm_nvls_verdict", map[string]string{"verdict": "yes", "exercised": "false"}))
}

// TestPrometheusEscapes: text read from the node (a GPU name, a diagnosis) cannot break a
// line or a label.
func TestPrometheusEscapes(t *testing.T) {
	doc := &document{Command: cmdReport, Vmmprobe: programInfo{Version: "v1 \"quoted\"\\\nnext"}, GeneratedAt: "not a time",
		Backend: backendInfo{Name: "cuda"}, Devices: []deviceInfo{{Index: 0, UUID: "GPU-\"}\n evil 1"}}}
	fams := parsePrometheus(t, string(renderPrometheus(doc)))
	info := fams["cuvmm_probe_info"].GetMetric()[0]
	for _, l := range info.GetLabel() {
		if l.GetName() == "version" {
			assert.Equal(t, "v1 \"quoted\"\\\nnext", l.GetValue())
		}
	}
	assert.NotContains(t, fams, "cuvmm_probe_timestamp_seconds", "an unparsable time is left out")
	assert.Equal(t, 1.0, gauge(t, fams, "cuvmm_device_feature", map[string]string{"uuid": "GPU-\"}\n evil 1", "feature": "vmm"})+1)
}

// TestEscapeLabel: a label value with quotes, backslashes, line feeds or bytes that are not
// UTF-8 (a string from NVML or the driver) still makes a page Prometheus parses, with the
// value it had where it was valid.
func TestEscapeLabel(t *testing.T) {
	t.Parallel()
	raw := "GPU-\xaa\"x\\y\nz"
	text := "# HELP m help\n# TYPE m gauge\nm{uuid=\"" + escapeLabel(raw) + "\"} 1\n"
	fams := parsePrometheus(t, text)
	assert.Equal(t, 1.0, gauge(t, fams, "m", map[string]string{"uuid": "GPU-\uFFFD\"x\\y\nz"}))
}
