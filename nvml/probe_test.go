package nvml

import (
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/loader"
	"github.com/stretchr/testify/require"
)

// hgxGPU is a GPU of an HGX H200 node whose fabric is up: registered, healthy, 18 NVLinks
// to NVSwitches.
func hgxGPU(i int) fakeGPU {
	links := make([]fakeLink, 18)
	for l := range links {
		links[l] = fakeLink{active: true, remote: NVLINK_DEVICE_TYPE_SWITCH}
	}
	return fakeGPU{
		name:    "NVIDIA H200",
		uuid:    []string{"GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632", "GPU-5a0d2f3c-9e51-4c1e-8f6e-0d4b1c2a3e4f"}[i],
		busID:   []string{"00000000:18:00.0", "00000000:2A:00.0"}[i],
		cluster: [16]byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef},
		clique:  32766,
		state:   GPU_FABRIC_STATE_COMPLETED,
		// every two-bit field FALSE, configuration NONE, partition assigned
		health:  2 | 2<<2 | 2<<4 | 2<<6 | 1<<8 | 1<<12,
		summary: GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
		links:   links,
	}
}

func hgxNode() *fakeNVML {
	return &fakeNVML{driver: "580.65.06", cudaVersion: 13000, gpus: []fakeGPU{hgxGPU(0), hgxGPU(1)}}
}

func TestProbeHealthyFabric(t *testing.T) {
	f := hgxNode()
	n := f.use(t).probe()

	require.Empty(t, n.Unavailable)
	require.Equal(t, "/fake/libnvidia-ml.so.1", n.Library)
	require.Equal(t, Known("580.65.06"), n.DriverVersion)
	require.Equal(t, Known(13000), n.CUDADriverVersion)
	require.Equal(t, Known(2), n.GPUCount)
	require.Len(t, n.GPUs, 2)
	g := n.GPUs[1]
	require.Equal(t, 1, g.Index)
	require.Equal(t, Known("NVIDIA H200"), g.Name)
	require.Equal(t, Known("GPU-5a0d2f3c-9e51-4c1e-8f6e-0d4b1c2a3e4f"), g.UUID)
	require.Equal(t, Known("00000000:2A:00.0"), g.PCIBusID)

	require.True(t, g.Fabric.Known(), g.Fabric.Why)
	fi := g.Fabric.Value
	require.Equal(t, "10325476-98ba-dcfe-0123-456789abcdef", fi.ClusterUUID)
	require.Equal(t, uint32(32766), fi.CliqueID)
	require.Equal(t, GPU_FABRIC_STATE_COMPLETED, fi.State)
	require.Equal(t, SUCCESS, fi.Status)
	require.True(t, fi.Registered())
	require.Equal(t, 3, fi.Version)
	require.Equal(t, Known(GPU_FABRIC_HEALTH_SUMMARY_HEALTHY), fi.Summary)
	require.True(t, fi.Health.Known())
	require.Empty(t, fi.Health.Value.Problems())
	require.Equal(t, HealthTrue, fi.Health.Value.PartitionAssigned())

	require.Equal(t, Known(NvLinks{Total: 18, Active: 18, ToNVSwitch: Known(true)}), g.NvLinks)

	require.Equal(t, 1, f.inits)
	require.Equal(t, 1, f.shutdowns, "Probe shuts NVML down again")
	require.Equal(t, []uint32{0x03000028, 0x03000028}, f.fabricVersions, "nvmlGpuFabricInfo_v3 first")
	require.Equal(t, map[string]uintptr{"nvmlSystemGetDriverVersion": 80, "nvmlDeviceGetName": 96, "nvmlDeviceGetUUID": 96}, f.bufSizes)
}

func TestProbeLibraryAbsent(t *testing.T) {
	f := &fakeNVML{absent: true}
	l := f.use(t)
	n := l.probe()

	const why = "nvml: nvmlInit_v2: loader: cannot load the NVML library: libnvidia-ml.so.1: libnvidia-ml.so.1: cannot open shared object file: No such file or directory"
	require.Equal(t, "NVML unavailable: "+why, n.Unavailable)
	require.Empty(t, n.Library)
	require.Equal(t, Fact[string]{Why: why, Code: ERROR_LIBRARY_NOT_FOUND}, n.DriverVersion)
	require.Equal(t, Fact[int]{Why: why, Code: ERROR_LIBRARY_NOT_FOUND}, n.CUDADriverVersion)
	require.Equal(t, Fact[int]{Why: why, Code: ERROR_LIBRARY_NOT_FOUND}, n.GPUCount)
	require.Empty(t, n.GPUs)

	err := l.init()
	require.ErrorIs(t, err, ERROR_LIBRARY_NOT_FOUND)
	require.ErrorIs(t, err, loader.ErrNoDriver)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "nvmlInit_v2", e.Op)
}

func TestProbeInitFails(t *testing.T) {
	f := &fakeNVML{initRet: ERROR_DRIVER_NOT_LOADED}
	n := f.use(t).probe()
	require.Equal(t, "NVML unavailable: nvml: nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED: NVIDIA driver is not loaded", n.Unavailable)
	require.Equal(t, "/fake/libnvidia-ml.so.1", n.Library)
	require.Equal(t, ERROR_DRIVER_NOT_LOADED, n.GPUCount.Code)
	require.Empty(t, n.GPUs)
	require.Zero(t, f.shutdowns, "no nvmlShutdown without a successful nvmlInit")
}

// An NVML without the fabric calls (older than the fabric API) still gives the rest.
func TestProbeSymbolAbsent(t *testing.T) {
	f := hgxNode()
	f.missing = map[string]bool{
		"nvmlDeviceGetGpuFabricInfoV":         true,
		"nvmlDeviceGetGpuFabricInfo":          true,
		"nvmlSystemGetCudaDriverVersion_v2":   true,
		"nvmlDeviceGetNvLinkRemoteDeviceType": true,
	}
	n := f.use(t).probe()
	require.Empty(t, n.Unavailable)
	require.Equal(t, Known("580.65.06"), n.DriverVersion)
	require.Equal(t, ERROR_FUNCTION_NOT_FOUND, n.CUDADriverVersion.Code)
	require.Contains(t, n.CUDADriverVersion.Why, "nvmlSystemGetCudaDriverVersion_v2")

	g := n.GPUs[0]
	require.Equal(t, Known("NVIDIA H200"), g.Name)
	require.False(t, g.Fabric.Known())
	require.Equal(t, ERROR_FUNCTION_NOT_FOUND, g.Fabric.Code)
	require.Equal(t, "nvml: nvmlDeviceGetGpuFabricInfo(device 0): loader: nvmlDeviceGetGpuFabricInfo: symbol not found: not supported by this driver", g.Fabric.Why)
	require.Equal(t, 18, g.NvLinks.Value.Active)
	require.False(t, g.NvLinks.Value.ToNVSwitch.Known())
	require.Equal(t, ERROR_FUNCTION_NOT_FOUND, g.NvLinks.Value.ToNVSwitch.Code)
}

func TestProbeFabricFallbacks(t *testing.T) {
	t.Run("no nvmlDeviceGetGpuFabricInfoV", func(t *testing.T) {
		f := hgxNode()
		f.missing = map[string]bool{"nvmlDeviceGetGpuFabricInfoV": true}
		fi := f.use(t).probe().GPUs[0].Fabric
		require.True(t, fi.Known(), fi.Why)
		require.Equal(t, 1, fi.Value.Version)
		require.Equal(t, "10325476-98ba-dcfe-0123-456789abcdef", fi.Value.ClusterUUID)
		require.Equal(t, uint32(32766), fi.Value.CliqueID)
		require.Equal(t, GPU_FABRIC_STATE_COMPLETED, fi.Value.State)
		require.True(t, fi.Value.Registered())
		require.False(t, fi.Value.Health.Known())
		require.Equal(t, ERROR_FUNCTION_NOT_FOUND, fi.Value.Health.Code)
		require.Contains(t, fi.Value.Health.Why, "nvmlGpuFabricInfo_t has no health mask")
		require.False(t, fi.Value.Summary.Known())
	})
	t.Run("v2 only", func(t *testing.T) {
		f := hgxNode()
		f.gpus = f.gpus[:1]
		f.gpus[0].fabricV2Only = true
		fi := f.use(t).probe().GPUs[0].Fabric
		require.True(t, fi.Known(), fi.Why)
		require.Equal(t, []uint32{0x03000028, 0x02000024}, f.fabricVersions)
		require.Equal(t, 2, fi.Value.Version)
		require.Equal(t, Known(f.gpus[0].health), fi.Value.Health)
		require.Equal(t, ERROR_ARGUMENT_VERSION_MISMATCH, fi.Value.Summary.Code)
		require.Equal(t, uint32(32766), fi.Value.CliqueID)
	})
}

// A PCIe GPU: no fabric, no NVLink.
func TestProbeFabricNotSupported(t *testing.T) {
	f := &fakeNVML{driver: "580.65.06", cudaVersion: 13000, gpus: []fakeGPU{{
		name: "NVIDIA H100 PCIe", uuid: "GPU-0", busID: "00000000:01:00.0",
		fabricRet: ERROR_NOT_SUPPORTED, linksRet: ERROR_NOT_SUPPORTED,
	}}}
	g := f.use(t).probe().GPUs[0]
	require.Equal(t, ERROR_NOT_SUPPORTED, g.Fabric.Code)
	require.Equal(t, "nvml: nvmlDeviceGetGpuFabricInfoV(device 0): NVML_ERROR_NOT_SUPPORTED: the requested operation is not available on target device", g.Fabric.Why)
	require.Equal(t, "unknown (nvml: nvmlDeviceGetGpuFabricInfoV(device 0): NVML_ERROR_NOT_SUPPORTED: the requested operation is not available on target device)", g.Fabric.String())
	require.Equal(t, ERROR_NOT_SUPPORTED, g.NvLinks.Code)
	require.Equal(t, "nvml: nvmlDeviceGetNvLinkState(device 0, link 0): NVML_ERROR_NOT_SUPPORTED: the requested operation is not available on target device", g.NvLinks.Why)
	require.Equal(t, Known("NVIDIA H100 PCIe"), g.Name)
}

// Fabric Manager not (yet) done with the GPU, or done and failed.
func TestProbeFabricStates(t *testing.T) {
	for _, tc := range []struct {
		state  FabricState
		status Return
		name   string
	}{
		{GPU_FABRIC_STATE_NOT_STARTED, SUCCESS, "NVML_GPU_FABRIC_STATE_NOT_STARTED"},
		{GPU_FABRIC_STATE_IN_PROGRESS, SUCCESS, "NVML_GPU_FABRIC_STATE_IN_PROGRESS"},
		{GPU_FABRIC_STATE_COMPLETED, ERROR_INSUFFICIENT_RESOURCES, "NVML_GPU_FABRIC_STATE_COMPLETED"},
		{GPU_FABRIC_STATE_COMPLETED, ERROR_NOT_READY, "NVML_GPU_FABRIC_STATE_COMPLETED"},
	} {
		f := hgxNode()
		f.gpus[0].state, f.gpus[0].status = tc.state, tc.status
		fi := f.use(t).probe().GPUs[0].Fabric.Value
		require.Equal(t, tc.state, fi.State)
		require.Equal(t, tc.name, fi.State.String())
		require.Equal(t, tc.status, fi.Status)
		require.False(t, fi.Registered(), "%v %v", tc.state, tc.status)
	}
}

func TestProbeDegradedHealth(t *testing.T) {
	f := hgxNode()
	g := &f.gpus[0]
	// bandwidth degraded, route recovery in progress, route healthy, no access timeout
	// recovery, too few NVLinks, partition assigned
	g.health = 1 | 1<<2 | 2<<4 | 2<<6 | 5<<8 | 1<<12
	g.summary = GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
	fi := f.use(t).probe().GPUs[0].Fabric.Value
	require.True(t, fi.Registered(), "registration and health are separate")
	require.Equal(t, []string{
		"NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE",
		"NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE",
		"NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS",
	}, fi.Health.Value.Problems())
	require.Equal(t, Known(GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY), fi.Summary)
	require.Equal(t, "NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY", fi.Summary.String())
}

func TestProbeNvLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links []fakeLink
		want  Fact[NvLinks]
	}{
		{"twelve links, two down, the first active one's far end unknown, then a switch",
			append([]fakeLink{{active: false}, {active: true, remoteRet: ERROR_UNKNOWN}, {active: false}},
				repeatLink(fakeLink{active: true, remote: NVLINK_DEVICE_TYPE_SWITCH}, 9)...),
			Known(NvLinks{Total: 12, Active: 10, ToNVSwitch: Known(true)})},
		{"GPU to GPU (no NVSwitch)",
			repeatLink(fakeLink{active: true, remote: NVLINK_DEVICE_TYPE_GPU}, 4),
			Known(NvLinks{Total: 4, Active: 4, ToNVSwitch: Known(false)})},
		{"all links down",
			repeatLink(fakeLink{}, 18),
			Known(NvLinks{Total: 18, ToNVSwitch: Known(false)})},
		{"far ends unknown",
			repeatLink(fakeLink{active: true, remoteRet: ERROR_GPU_IS_LOST}, 2),
			Known(NvLinks{Total: 2, Active: 2, ToNVSwitch: Fact[bool]{
				Why:  "nvml: nvmlDeviceGetNvLinkRemoteDeviceType(device 0, link 0): NVML_ERROR_GPU_IS_LOST: the GPU has fallen off the bus or has otherwise become inaccessible",
				Code: ERROR_GPU_IS_LOST}})},
		{"no links at all", nil, Fact[NvLinks]{
			Why:  "nvml: nvmlDeviceGetNvLinkState(device 0, link 0): NVML_ERROR_INVALID_ARGUMENT: a supplied argument is invalid",
			Code: ERROR_INVALID_ARGUMENT}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := hgxNode()
			f.gpus = f.gpus[:1]
			f.gpus[0].links = tc.links
			require.Equal(t, tc.want, f.use(t).probe().GPUs[0].NvLinks)
		})
	}

	f := hgxNode()
	f.gpus[0].linksRet = ERROR_GPU_IS_LOST
	nl := f.use(t).probe().GPUs[0].NvLinks
	require.Equal(t, ERROR_GPU_IS_LOST, nl.Code, "a failure other than a missing link makes them unknown")
}

func repeatLink(l fakeLink, n int) []fakeLink {
	s := make([]fakeLink, n)
	for i := range s {
		s[i] = l
	}
	return s
}

// A GPU NVML cannot open is recorded with the reason; the others are probed.
func TestProbeDeviceLost(t *testing.T) {
	f := hgxNode()
	f.gpus[0].handleRet = ERROR_GPU_IS_LOST
	n := f.use(t).probe()
	require.Len(t, n.GPUs, 2)
	g := n.GPUs[0]
	for _, fact := range []Fact[string]{g.Name, g.UUID, g.PCIBusID} {
		require.Equal(t, ERROR_GPU_IS_LOST, fact.Code)
		require.Equal(t, "nvml: nvmlDeviceGetHandleByIndex_v2(0): NVML_ERROR_GPU_IS_LOST: the GPU has fallen off the bus or has otherwise become inaccessible", fact.Why)
	}
	require.Equal(t, ERROR_GPU_IS_LOST, g.Fabric.Code)
	require.Equal(t, ERROR_GPU_IS_LOST, g.NvLinks.Code)
	require.Equal(t, Known("NVIDIA H200"), n.GPUs[1].Name)
}

func TestProbeDeviceCount(t *testing.T) {
	f := hgxNode()
	f.countRet = ERROR_NO_PERMISSION
	n := f.use(t).probe()
	require.Equal(t, ERROR_NO_PERMISSION, n.GPUCount.Code)
	require.Empty(t, n.GPUs)

	f = hgxNode()
	f.count = 1 << 20
	n = f.use(t).probe()
	require.Equal(t, ERROR_UNKNOWN, n.GPUCount.Code)
	require.Contains(t, n.GPUCount.Why, "1048576 devices")
	require.Empty(t, n.GPUs)
}

// Strings come back cut at the NUL, and as valid UTF-8 whatever NVML wrote.
func TestProbeStrings(t *testing.T) {
	f := hgxNode()
	f.gpus[0].name = "NVIDIA \xff H200"
	f.gpus[0].uuid = strings.Repeat("u", 95)
	n := f.use(t).probe()
	require.Equal(t, Known("NVIDIA \uFFFD H200"), n.GPUs[0].Name)
	require.Equal(t, Known(strings.Repeat("u", 95)), n.GPUs[0].UUID)
}

func TestCString(t *testing.T) {
	require.Equal(t, "abc", cString([]byte("abc\x00def")))
	require.Equal(t, "abcdef", cString([]byte("abcdef")), "no NUL: the whole buffer")
	require.Equal(t, "", cString([]byte{0, 'x'}))
}

// The methods of a Device not from DeviceGetHandleByIndex fail; nothing reaches NVML.
func TestZeroDevice(t *testing.T) {
	var d Device
	_, err := d.Name()
	require.ErrorIs(t, err, ERROR_INVALID_ARGUMENT)
	_, err = d.GpuFabricInfo()
	require.ErrorIs(t, err, ERROR_INVALID_ARGUMENT)
	_, err = d.NvLinkState(0)
	require.ErrorIs(t, err, ERROR_INVALID_ARGUMENT)
	_, err = d.NvLinkRemoteDeviceType(0)
	require.ErrorIs(t, err, ERROR_INVALID_ARGUMENT)
	_, err = d.PciBusID()
	require.EqualError(t, err, "nvml: nvmlDeviceGetPciInfo_v3(a Device not from DeviceGetHandleByIndex): NVML_ERROR_INVALID_ARGUMENT: a supplied argument is invalid")
}

func TestDeviceCalls(t *testing.T) {
	f := hgxNode()
	f.gpus[0].links = []fakeLink{{active: true, remote: NVLINK_DEVICE_TYPE_SWITCH}, {}}
	l := f.use(t)
	require.NoError(t, l.init())
	_, err := l.deviceByIndex(-1)
	require.ErrorIs(t, err, ERROR_INVALID_ARGUMENT)
	_, err = l.deviceByIndex(2)
	require.ErrorIs(t, err, ERROR_INVALID_ARGUMENT, "NVML's own answer")
	d, err := l.deviceByIndex(0)
	require.NoError(t, err)
	require.Equal(t, 0, d.Index())

	up, err := d.NvLinkState(0)
	require.NoError(t, err)
	require.True(t, up)
	up, err = d.NvLinkState(1)
	require.NoError(t, err)
	require.False(t, up)
	typ, err := d.NvLinkRemoteDeviceType(0)
	require.NoError(t, err)
	require.Equal(t, NVLINK_DEVICE_TYPE_SWITCH, typ)
	_, err = d.NvLinkState(NVLINK_MAX_LINKS)
	require.EqualError(t, err, "nvml: nvmlDeviceGetNvLinkState(device 0, link 36: links are 0 to 35): NVML_ERROR_INVALID_ARGUMENT: a supplied argument is invalid")
	_, err = d.NvLinkRemoteDeviceType(-1)
	require.ErrorIs(t, err, ERROR_INVALID_ARGUMENT)
	require.NoError(t, l.shutdown())
}

// Probe through the loader: on a machine without NVML (CI) it reports NVML unavailable;
// with one, a node with its GPUs.
func TestProbeSystem(t *testing.T) {
	n := Probe()
	if n.Unavailable != "" {
		require.True(t, strings.HasPrefix(n.Unavailable, "NVML unavailable: nvml: nvmlInit_v2: "), n.Unavailable)
		require.False(t, n.DriverVersion.Known())
		require.False(t, n.GPUCount.Known())
		require.Empty(t, n.GPUs)
		return
	}
	require.True(t, n.GPUCount.Known(), n.GPUCount.Why)
	require.Len(t, n.GPUs, n.GPUCount.Value)
}

func TestSymbols(t *testing.T) {
	var names []string
	for _, p := range Symbols() {
		names = append(names, p.Symbol().Name)
	}
	require.ElementsMatch(t, []string{
		"nvmlInit_v2", "nvmlShutdown", "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion_v2",
		"nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName", "nvmlDeviceGetUUID",
		"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo",
		"nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemoteDeviceType",
	}, names)
	fns := callbacks()
	for _, n := range names {
		require.Contains(t, fns, n, "the fake has every entry point")
	}
}
