package main

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rdmaNode is a Linux node with the RDMA devices and files the test gives it.
func rdmaNode(t *testing.T, nics int, files map[string]string) *memSystem {
	t.Helper()
	m := newMemSystem(false)
	for i := range nics {
		m.dir("/sys/class/infiniband/mlx5_" + string(rune('0'+i)))
		m.add("/dev/infiniband/uverbs"+string(rune('0'+i)), memFile{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, major: 231})
	}
	for name, data := range files {
		if data == "<dir>" {
			m.dir(name)
			continue
		}
		m.add(name, memFile{data: data})
	}
	return m
}

// dmaBufChecks is a document whose dma-buf check passed on the devices given.
func dmaBufChecks(devs ...int) *document {
	doc := &document{}
	for _, d := range devs {
		doc.Checks = append(doc.Checks, checkResult{Check: "dma-buf", Device: intp(d), Status: statusOK})
	}
	doc.Checks = append(doc.Checks, checkResult{Check: "dma-buf", Device: intp(9), Status: statusFailed})
	return doc
}

func gz(t *testing.T, s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.String()
}

func TestRDMA(t *testing.T) {
	const release = "/proc/sys/kernel/osrelease"
	for _, c := range []struct {
		name   string
		nics   int
		files  map[string]string
		doc    *document
		state  string
		says   []string
		remedy string
	}{
		{"no-nic", 0, nil, dmaBufChecks(0), stateNotNeeded,
			[]string{"no RDMA device is visible", "no peer-memory module"}, ""},
		{"dma-buf", 2, map[string]string{release: "6.8.0-1015-aws\n"}, dmaBufChecks(0, 1), stateOK,
			[]string{"2 RDMA device(s) (mlx5_0, mlx5_1): GPU memory registers through dma-buf (exported on devices 0,1; kernel 6.8.0-1015-aws)"}, ""},
		{"dma-buf-and-peermem", 1, map[string]string{release: "5.15.0\n", "/sys/module/nvidia_peermem": "<dir>"}, dmaBufChecks(0), stateOK,
			[]string{"through dma-buf", "nvidia_peermem is loaded too"}, ""},
		{"dma-buf-kernel-unknown", 1, nil, dmaBufChecks(0), stateOK,
			[]string{"the kernel release cannot be read; RDMA registrations of dma-bufs need 5.12 or later"}, ""},
		{"peermem-old-kernel", 1, map[string]string{release: "5.4.0-150-generic\n",
			"/proc/modules": "nvidia 123 1 - Live 0x0\nnvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n"}, dmaBufChecks(0), stateOK,
			[]string{"through nvidia_peermem (VMM memory must be made GPUDirect RDMA capable); not through dma-buf: kernel 5.4.0-150-generic is older than 5.12"}, ""},
		{"nv-peer-mem", 1, map[string]string{"/proc/modules": "nv_peer_mem 16384 0 - Live 0x0\n"}, dmaBufChecks(), stateOK,
			[]string{"through nv_peer_mem", "no device exported a dma-buf"}, ""},
		{"neither", 1, map[string]string{release: "6.1.0\n"}, dmaBufChecks(), stateProblem,
			[]string{"but neither path for GPU memory: no device exported a dma-buf (see the dma-buf check), and no peer-memory module"},
			"load the peer-memory module (modprobe nvidia-peermem), or use dma-buf"},
		{"no-device-files", 1, map[string]string{"/dev/infiniband/uverbs0": "<gone>"}, dmaBufChecks(0), stateProblem,
			[]string{"none of their device files (/dev/infiniband/uverbsN) is here"}, "--device=/dev/infiniband"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := rdmaNode(t, c.nics, c.files)
			if c.files["/dev/infiniband/uverbs0"] == "<gone>" {
				delete(m.files, "/dev/infiniband/uverbs0")
			}
			r := readRDMA(m, c.doc)
			assert.Equal(t, c.state, r.State, r.Diagnosis)
			for _, s := range c.says {
				assert.Contains(t, r.Diagnosis, s)
			}
			if c.remedy == "" {
				assert.Empty(t, r.Remedy)
			} else {
				assert.Contains(t, r.Remedy, c.remedy)
			}
			assert.NotContains(t, r.DmaBufDevices, 9, "a failed check exported nothing")
		})
	}
}

func TestRDMAKernelFacts(t *testing.T) {
	m := rdmaNode(t, 1, map[string]string{
		"/proc/sys/kernel/osrelease": "6.2.0\n",
		"/proc/config.gz":            gz(t, "CONFIG_FOO=y\nCONFIG_DMA_SHARED_BUFFER=y\n"),
		"/sys/kernel/dmabuf":         "<dir>",
	})
	r := readRDMA(m, dmaBufChecks(0))
	assert.Equal(t, "y", r.KernelConfig)
	assert.True(t, r.DmaBufSysfs)
	require.NotNil(t, r.KernelDmaBufMR)
	assert.True(t, *r.KernelDmaBufMR)
	assert.Equal(t, 1, r.UverbsFiles)

	var b strings.Builder
	tableRDMA(&b, &document{RDMA: r})
	assert.Equal(t, `
gpudirect rdma             ok: 1 RDMA device(s) (mlx5_0): GPU memory registers through dma-buf (exported on devices 0; kernel 6.2.0)
  rdma devices             mlx5_0 (1 device file(s) here)
  peer memory              not loaded
  kernel                   6.2.0, CONFIG_DMA_SHARED_BUFFER y
  dma-buf export           devices 0
`, b.String())

	m = rdmaNode(t, 1, map[string]string{"/proc/config.gz": gz(t, "# CONFIG_DMA_SHARED_BUFFER is not set\n")})
	assert.Equal(t, "not set", readRDMA(m, dmaBufChecks()).KernelConfig)
	m = rdmaNode(t, 1, map[string]string{"/proc/config.gz": "not gzip"})
	assert.Equal(t, "", readRDMA(m, dmaBufChecks()).KernelConfig)

	for release, want := range map[string][2]bool{
		"5.12.0": {true, true}, "5.11.22": {false, true}, "6.0": {true, true}, "4.18.0-553.el8_10.x86_64": {false, true},
		"5.15+": {true, true}, "unknown": {false, false}, "": {false, false}, "x.y": {false, false},
	} {
		ok, known := atLeast(release, 5, 12)
		assert.Equal(t, want, [2]bool{ok, known}, release)
	}

	m = rdmaNode(t, 2, nil)
	m.linux = false
	r = readRDMA(m, dmaBufChecks(0))
	assert.Equal(t, stateUnknown, r.State)
	assert.Empty(t, r.Devices, "not read off Linux")

	// A simulated node's remedy names no command.
	m = rdmaNode(t, 1, nil)
	m.simulated = true
	r = readRDMA(m, dmaBufChecks())
	assert.NotContains(t, r.Remedy, "modprobe")
	assert.Contains(t, r.Remedy, "simulated node")
}
