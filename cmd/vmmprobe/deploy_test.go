package main

import (
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// manifest is what the tests read of a sample Job or DaemonSet.
type manifest struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Args []string `yaml:"args"`
					Env  []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					VolumeMounts []struct {
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					HostPath struct {
						Path string `yaml:"path"`
					} `yaml:"hostPath"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestDeployManifests: the sample manifests run a command line vmmprobe accepts, write into
// the directory they mount from the host, give the container NVML, and never opt into
// multicast.
func TestDeployManifests(t *testing.T) {
	for file, kind := range map[string]string{"daemonset.yaml": "DaemonSet", "job.yaml": "Job"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "vmmprobe", file))
		require.NoError(t, err)
		var m manifest
		require.NoError(t, yaml.Unmarshal(data, &m), file)
		assert.Equal(t, kind, m.Kind)
		spec := m.Spec.Template.Spec
		require.Len(t, spec.Containers, 1, file)
		c := spec.Containers[0]
		opts, code := parseArgs(c.Args, io.Discard, io.Discard)
		require.Equal(t, -1, code, "%s: vmmprobe %s", file, strings.Join(c.Args, " "))
		assert.False(t, opts.multicast, file)
		assert.Equal(t, formatLabels, opts.format, file)
		assert.Equal(t, "cuda", opts.backend.Kind, "%s: labels of a real node only", file)
		assert.Equal(t, kind == "DaemonSet", opts.interval > 0, file)
		require.Len(t, c.VolumeMounts, 1)
		assert.Equal(t, path.Dir(opts.outputFile), c.VolumeMounts[0].MountPath, file) // slash paths, whatever the OS
		require.Len(t, spec.Volumes, 1)
		assert.Equal(t, c.VolumeMounts[0].MountPath, spec.Volumes[0].HostPath.Path, file)
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		assert.Contains(t, env["NVIDIA_DRIVER_CAPABILITIES"], "utility", "%s: NVML is mounted only with utility", file)
	}
}
