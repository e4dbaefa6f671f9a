package main

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fabricGPU is what NVML says of a GPU on a fabric in state st.
func fabricGPU(i int, st nvml.FabricState, status nvml.Return, health nvml.HealthMask, sum nvml.HealthSummary, toSwitch bool) nvml.GPU {
	return nvml.GPU{
		Index: i, UUID: nvml.Known("GPU-" + strconv.Itoa(i)), PCIBusID: nvml.Known("00000000:0" + strconv.Itoa(i) + ":00.0"),
		Fabric: nvml.Known(nvml.FabricInfo{ClusterUUID: zeroCluster, State: st, Status: status,
			Health: nvml.Known(health), Summary: nvml.Known(sum), Version: 3}),
		NvLinks: nvml.Known(nvml.NvLinks{Total: 18, Active: 18, ToNVSwitch: nvml.Known(toSwitch)}),
	}
}

const okHealth = nvml.HealthMask(2 | 2<<2 | 2<<4 | 2<<6 | 1<<8)

// testNode is a Linux node with NVML reporting gpus and the files the options add.
type testNode struct {
	*memSystem
}

func newTestNode(gpus ...nvml.GPU) testNode {
	m := newMemSystem(false)
	m.nvml = nvml.Node{DriverVersion: nvml.Known("580.65.06"), GPUCount: nvml.Known(len(gpus)), GPUs: gpus, Library: "libnvidia-ml.so.1"}
	m.dir("/dev")
	m.add("/proc/1/comm", memFile{data: "systemd\n"})
	return testNode{m}
}

func (n testNode) switches(k int) testNode {
	for i := range k {
		n.add("/dev/nvidia-nvswitch"+strconv.Itoa(i), charDev(238))
	}
	n.add("/dev/nvidia-nvswitchctl", charDev(238))
	return n
}

func (n testNode) fmInstalled() testNode {
	n.add("/usr/lib/systemd/system/"+fmUnit, memFile{data: "[Unit]\n"})
	return n
}

func (n testNode) fmRunning(pid int) testNode {
	n.add("/proc/"+strconv.Itoa(pid)+"/comm", memFile{data: fmComm + "\n"})
	return n
}

func readTestNode(n testNode, devs []deviceInfo, initErr error) *nodeReport {
	return readNode(n, readIMEX(n), devs, initErr)
}

func hasProblem(r *nodeReport, part, diagnosis string) bool {
	for _, p := range r.Problems {
		if p.Part == part && strings.Contains(p.Diagnosis, diagnosis) {
			return true
		}
	}
	return false
}

func TestFabricManagerDown(t *testing.T) {
	gpus := []nvml.GPU{
		fabricGPU(0, nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.SUCCESS, 0, 0, true),
		fabricGPU(1, nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.SUCCESS, 0, 0, true),
	}
	r := readTestNode(newTestNode(gpus...).switches(4).fmInstalled(), nil, nil)
	assert.Equal(t, stateProblem, r.FabricManager.State)
	assert.True(t, r.FabricManager.Needed && r.FabricManager.Local)
	assert.Contains(t, r.FabricManager.Diagnosis, "Fabric Manager is not running (no nv-fabricmanager process, nvidia-fabricmanager.service not enabled, nothing listening on its command port): 2 GPU(s) are not registered")
	assert.Equal(t, "start Fabric Manager and enable it at boot (sudo systemctl enable --now nvidia-fabricmanager); its version must equal the driver's (580.65.06)", r.FabricManager.Remedy)
	assert.Equal(t, stateOK, r.NVSwitch.State)
	assert.Equal(t, 4, r.NVSwitch.DeviceFiles)
	assert.True(t, hasProblem(r, "gpu 1", "has not started its fabric registration"))

	// The same with cuInit failing as it does then: the diagnosis says what it costs.
	r = readTestNode(newTestNode(gpus...).switches(4).fmInstalled(), nil, &cu.Error{Op: "cuInit", Err: cu.ERROR_SYSTEM_NOT_READY})
	assert.Contains(t, r.FabricManager.Diagnosis, "cuInit fails with CUDA_ERROR_SYSTEM_NOT_READY")

	// Not installed: install it first.
	r = readTestNode(newTestNode(gpus...).switches(4), nil, nil)
	assert.Contains(t, r.FabricManager.Remedy, "install nvidia-fabricmanager of the driver's version (580.65.06)")
	assert.Contains(t, r.FabricManager.Diagnosis, "no nvidia-fabricmanager.service")
}

func TestFabricManagerRunsButGPUsAreNotRegistered(t *testing.T) {
	n := newTestNode(
		fabricGPU(0, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, okHealth, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, true),
		fabricGPU(1, nvml.GPU_FABRIC_STATE_IN_PROGRESS, nvml.SUCCESS, 0, 0, true),
		fabricGPU(2, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.ERROR_INSUFFICIENT_RESOURCES, 0, 0, true),
	).switches(4).fmInstalled().fmRunning(4242)
	n.add(fmConfig, memFile{data: "# comment\nFM_CMD_PORT_NUMBER=7777\n"})
	n.add("/proc/net/tcp6", memFile{data: "  sl  local_address                         remote_address                        st\n" +
		"   0: 00000000000000000000000001000000:1E61 00000000000000000000000000000000:0000 0A 00000000:00000000\n"})
	r := readTestNode(n, nil, nil)
	assert.Equal(t, []int{4242}, r.FabricManager.Processes)
	assert.Equal(t, "tcp port 7777", r.FabricManager.Listening)
	assert.Equal(t, stateProblem, r.FabricManager.State)
	assert.Contains(t, r.FabricManager.Diagnosis, "runs (process 4242) but 2 GPU(s) are not registered")
	assert.Contains(t, r.FabricManager.Remedy, "read its log")
	assert.Equal(t, stateOK, r.GPUs[0].State)
	assert.Contains(t, r.GPUs[1].Diagnosis, "registration is in progress")
	assert.Contains(t, r.GPUs[1].Remedy, "wait")
	assert.Contains(t, r.GPUs[2].Diagnosis, "registration failed: NVML_ERROR_INSUFFICIENT_RESOURCES")
}

// TestFabricSeenFromAContainer: no switch of its own, no daemon visible; NVML's view of
// the GPUs decides.
func TestFabricSeenFromAContainer(t *testing.T) {
	ok := newTestNode(
		fabricGPU(0, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, okHealth, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, true),
		fabricGPU(1, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, okHealth, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, true))
	r := readTestNode(ok, nil, nil)
	assert.Equal(t, stateOK, r.FabricManager.State)
	assert.False(t, r.FabricManager.Local)
	assert.Contains(t, r.FabricManager.Diagnosis, "outside what this process can see")
	assert.Contains(t, r.NVSwitch.Diagnosis, "2 GPU(s) have NVLinks to NVSwitches that this system does not manage")
	assert.Empty(t, r.Problems)

	down := newTestNode(fabricGPU(0, nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.SUCCESS, 0, 0, true))
	r = readTestNode(down, nil, nil)
	assert.Equal(t, stateProblem, r.FabricManager.State)
	assert.Contains(t, r.FabricManager.Diagnosis, "whose Fabric Manager runs outside this system")
	assert.Contains(t, r.FabricManager.Remedy, "managed outside this system")
}

func TestFabricHealth(t *testing.T) {
	unhealthy := okHealth&^(3<<4) | 1<<4 // ROUTE_UNHEALTHY_TRUE
	degraded := okHealth&^3 | 1          // DEGRADED_BW_TRUE
	n := newTestNode(
		fabricGPU(0, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, unhealthy, nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY, true),
		fabricGPU(1, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, degraded, nvml.GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY, true),
	).switches(4).fmRunning(7)
	devs := []deviceInfo{{Index: 0, UUID: "GPU-0", Multicast: multicastInfo{Supported: true}}, {Index: 1, UUID: "gpu-1", Multicast: multicastInfo{Supported: true}}}
	r := readTestNode(n, devs, nil)
	assert.Equal(t, stateProblem, r.GPUs[0].State)
	assert.Contains(t, r.GPUs[0].Diagnosis, "unhealthy: ROUTE_UNHEALTHY_TRUE, summary UNHEALTHY")
	assert.Equal(t, stateDegraded, r.GPUs[1].State)
	require.NotNil(t, r.GPUs[1].CUDADevice, "matched by UUID, whatever the case")
	assert.Equal(t, 1, *r.GPUs[1].CUDADevice)
	assert.Equal(t, stateOK, r.FabricManager.State, "both are registered")

	doc := &document{Devices: devs, Node: r, Symbols: &symbolReport{}}
	v := decideNVLS(doc)
	assert.Equal(t, verdictNo, v.Verdict)
	assert.Contains(t, v.Detail, "device 0's fabric is unhealthy")
	assert.Contains(t, v.Detail, "not exercised")
}

func TestNVMLMissing(t *testing.T) {
	n := newTestNode()
	n.nvml = nvml.Node{Unavailable: "NVML unavailable: loader: cannot load the NVML library"}
	r := readTestNode(n, []deviceInfo{{Index: 0}}, nil)
	assert.Equal(t, stateUnknown, r.NVML.State, "nothing suggests a fabric: not a problem")
	assert.Empty(t, r.Problems)
	assert.Contains(t, r.NVML.Remedy, "NVIDIA_DRIVER_CAPABILITIES includes utility (-e NVIDIA_DRIVER_CAPABILITIES=compute,utility)")

	r = readTestNode(n, []deviceInfo{{Index: 0, Multicast: multicastInfo{Supported: true}}}, nil)
	assert.Equal(t, stateProblem, r.NVML.State, "multicast-capable devices: there is a fabric to read")
	assert.True(t, hasProblem(r, "nvml", "NVML unavailable"))

	v := decideNVLS(&document{Devices: []deviceInfo{{Index: 0, Multicast: multicastInfo{Supported: true}}, {Index: 1, Multicast: multicastInfo{Supported: true}}}, Node: r})
	assert.Equal(t, verdictUnknown, v.Verdict)
}

func TestIMEXDaemonAndChannels(t *testing.T) {
	cluster := fabricGPU(0, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, okHealth, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, true)
	f := cluster.Fabric.Value
	f.ClusterUUID, f.CliqueID = "4d4e4e56-4c37-3200-8000-000000000001", 3
	cluster.Fabric = nvml.Known(f)
	n := newTestNode(cluster)
	n.add("/proc/devices", memFile{data: procDevices})
	r := readTestNode(n, nil, nil)
	assert.Equal(t, stateUnknown, r.IMEXDaemon.State)
	assert.Contains(t, r.IMEXDaemon.Remedy, "sudo systemctl enable --now nvidia-imex")
	assert.True(t, hasProblem(r, "imex_channels", "in a multi-node NVLink cluster"), "%+v", r.Problems)
	assert.Contains(t, r.GPUs[0].Diagnosis, "clique 3")

	n.add("/proc/77/comm", memFile{data: "nvidia-imex\n"})
	n.add(imexNodesConfig, memFile{data: "10.0.0.1\n"})
	n.add(imexChannelDir+"/channel0", charDev(234))
	r = readTestNode(n, nil, nil)
	assert.Equal(t, stateOK, r.IMEXDaemon.State)
	assert.True(t, r.IMEXDaemon.NodesConfig)
	assert.Empty(t, r.Problems)
}

// TestNodeHostile: what /proc and the configuration files hold is checked before use.
func TestNodeHostile(t *testing.T) {
	n := newTestNode()
	n.add("/proc/self/comm", memFile{data: fmComm + "\n"})
	n.add("/proc/-3/comm", memFile{data: fmComm + "\n"})
	n.add("/proc/12/comm", memFile{data: strings.Repeat("x", 100)})
	n.add("/proc/13/comm", memFile{data: fmComm + "\n", denied: fs.ErrPermission})
	n.add("/proc/14/comm", memFile{data: "nv-fabricmanager-imposter\n"})
	n.add(fmConfig, memFile{data: "FM_CMD_PORT_NUMBER=99999999\nFM_CMD_UNIX_SOCKET_PATH=relative/path\n"})
	n.add("/proc/net/tcp", memFile{data: "garbage\n0: zz:zz 0 0A\n   1: 0100007F:1A0A 00000000:0000 0A\n"})
	assert.Empty(t, processes(n, fmComm)[fmComm])
	assert.Equal(t, "tcp port 6666", fmListening(n), "a port out of range is the default; a relative socket path is ignored")

	n.add(fmConfig, memFile{data: "FM_CMD_UNIX_SOCKET_PATH=/run/fm.sock\n"})
	assert.Empty(t, fmListening(n), "the configured socket is not there")
	n.add("/run/fm.sock", memFile{mode: fs.ModeSocket})
	assert.Equal(t, "unix socket /run/fm.sock", fmListening(n))
	assert.False(t, tcpListening([]byte("   0: 0100007F:1A0A 00000000:0000 01\n"), 6666), "established, not listening")
}

func TestNodeOffLinux(t *testing.T) {
	n := newTestNode(fabricGPU(0, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, okHealth, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, false))
	n.linux = false
	r := readTestNode(n, nil, nil)
	for _, p := range []part{r.NVSwitch.part, r.FabricManager.part, r.IMEXDaemon.part} {
		assert.Equal(t, stateUnknown, p.State)
		assert.Contains(t, p.Diagnosis, "Linux only")
	}
	assert.Equal(t, stateOK, r.NVML.State, "NVML is read everywhere")
}

func TestNVLSRules(t *testing.T) {
	two := []deviceInfo{{Index: 0, UUID: "GPU-0", Multicast: multicastInfo{Supported: true}}, {Index: 1, UUID: "GPU-1", Multicast: multicastInfo{Supported: true}}}
	reg := func(i int) nvml.GPU {
		return fabricGPU(i, nvml.GPU_FABRIC_STATE_COMPLETED, nvml.SUCCESS, okHealth, nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, true)
	}
	node := readTestNode(newTestNode(reg(0), reg(1)).switches(4).fmRunning(9), two, nil)
	complete := &symbolReport{}
	v := decideNVLS(&document{Devices: two, Node: node, Symbols: complete})
	assert.Equal(t, verdictYes, v.Verdict, v.Detail)
	assert.False(t, v.Exercised)
	assert.Contains(t, v.Detail, "inferred, not exercised")

	v = decideNVLS(&document{Devices: two[:1], Node: node, Symbols: complete})
	assert.Equal(t, verdictNo, v.Verdict, "one GPU")

	v = decideNVLS(&document{Devices: two, Node: node, Symbols: &symbolReport{Multicast: symbolSet{Missing: []missingSymbol{{Name: "cuMulticastCreate"}}}}})
	assert.Equal(t, verdictNo, v.Verdict, "no multicast entry points")

	other := []deviceInfo{two[0], {Index: 1, UUID: "GPU-9", Multicast: multicastInfo{Supported: true}}}
	v = decideNVLS(&document{Devices: other, Node: readTestNode(newTestNode(reg(0), reg(1)), other, nil), Symbols: complete})
	assert.Equal(t, verdictUnknown, v.Verdict, "NVML does not list device 1")

	// Proof beats inference.
	checks := []checkResult{{Check: "multicast", Status: statusFailed, Detail: "create failed"}}
	v = decideNVLS(&document{Devices: two, Node: node, Symbols: complete, Checks: checks})
	assert.Equal(t, verdictNo, v.Verdict)
	assert.True(t, v.Exercised)
	checks[0].Status = statusOK
	v = decideNVLS(&document{Devices: two, Node: node, Symbols: complete, Checks: checks})
	assert.Equal(t, verdictYes, v.Verdict)
	assert.Contains(t, v.Detail, "as the multicast check (--unsafe-multicast) showed")

	v = decideNVLS(&document{Backend: backendInfo{InitError: "cuInit: CUDA_ERROR_SYSTEM_NOT_READY: not ready"}, Node: node})
	assert.Equal(t, verdictNo, v.Verdict)
	assert.Contains(t, v.Detail, "did not initialize (CUDA_ERROR_SYSTEM_NOT_READY)")
}
