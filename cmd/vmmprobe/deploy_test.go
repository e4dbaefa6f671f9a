package main

import (
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
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

// TestDeployPair: the two Jobs of pair.yaml run command lines vmmprobe accepts, one
// exporting and one importing on the Service's port, with the secret from the mounted
// Secret, and the importer never on the exporter's node.
func TestDeployPair(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "deploy", "vmmprobe", "pair.yaml"))
	require.NoError(t, err)
	defer f.Close()
	type doc struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Ports []struct {
				Port int `yaml:"port"`
			} `yaml:"ports"`
			ActiveDeadlineSeconds int `yaml:"activeDeadlineSeconds"`
			Template              struct {
				Spec struct {
					Hostname  string `yaml:"hostname"`
					Subdomain string `yaml:"subdomain"`
					Affinity  *struct {
						PodAntiAffinity struct {
							Required []struct {
								TopologyKey string `yaml:"topologyKey"`
							} `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
						} `yaml:"podAntiAffinity"`
					} `yaml:"affinity"`
					Containers []struct {
						Args         []string `yaml:"args"`
						VolumeMounts []struct {
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var docs []doc
	dec := yaml.NewDecoder(f)
	for {
		var d doc
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		docs = append(docs, d)
	}
	require.Len(t, docs, 4)
	var port string
	var listen, connect options
	var exporterHost string
	for _, d := range docs {
		switch d.Kind {
		case "Service":
			require.Len(t, d.Spec.Ports, 1)
			port = strconv.Itoa(d.Spec.Ports[0].Port)
		case "Job":
			spec := d.Spec.Template.Spec
			require.Len(t, spec.Containers, 1)
			c := spec.Containers[0]
			opts, code := parseArgs(c.Args, io.Discard, io.Discard)
			require.Equal(t, -1, code, "vmmprobe %s", strings.Join(c.Args, " "))
			assert.Equal(t, cmdPair, opts.command)
			assert.Equal(t, "cuda", opts.backend.Kind)
			require.Len(t, c.VolumeMounts, 1)
			assert.Equal(t, c.VolumeMounts[0].MountPath, path.Dir(opts.pair.secretFile))
			assert.Greater(t, time.Duration(d.Spec.ActiveDeadlineSeconds)*time.Second, opts.pair.timeout, "Kubernetes stops the pod only after vmmprobe gave up")
			if opts.pair.listen != "" {
				listen, exporterHost = opts, spec.Hostname+"."+spec.Subdomain
			} else {
				connect = opts
				require.NotNil(t, spec.Affinity)
				require.Len(t, spec.Affinity.PodAntiAffinity.Required, 1)
				assert.Equal(t, "kubernetes.io/hostname", spec.Affinity.PodAntiAffinity.Required[0].TopologyKey)
			}
		}
	}
	assert.Equal(t, ":"+port, listen.pair.listen)
	assert.Equal(t, exporterHost+":"+port, connect.pair.connect)
	assert.Equal(t, listen.pair.secretFile, connect.pair.secretFile)
}

// TestDockerfile: the image's last stage is a glibc base (the driver vmmprobe loads is a
// glibc library: the README's "Containers"), and the binary is built for the target
// platform without cgo.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Dockerfile"))
	require.NoError(t, err)
	var froms []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "FROM" {
			froms = append(froms, f[len(f)-1])
			if f[len(f)-2] == "AS" {
				froms[len(froms)-1] = f[len(f)-3]
			}
		}
	}
	require.NotEmpty(t, froms)
	final := froms[len(froms)-1]
	glibc := false
	for _, base := range []string{"gcr.io/distroless/base-debian12", "gcr.io/distroless/base-nossl-debian12", "debian:12-slim", "ubuntu:24.04"} {
		glibc = glibc || final == base || strings.HasPrefix(final, base+":") || strings.HasPrefix(final, base+"@")
	}
	assert.True(t, glibc, "the image's base %q has glibc", final)
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=$TARGETOS", "GOARCH=$TARGETARCH", "./cmd/vmmprobe", "--platform=$BUILDPLATFORM"} {
		assert.Contains(t, string(data), want)
	}
}
