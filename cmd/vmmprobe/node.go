package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/nvml"
)

// nodeReport is the node's fabric picture: what an NVLink fabric needs on this node
// (NVML to read it, NVSwitches and their Fabric Manager, the IMEX daemon and channels)
// and whether it has it, as seen from inside this process (a container sees less than its
// host). Each part has a state, a diagnosis and, when it is wrong, a remedy; Problems
// gathers the parts that are wrong.
type nodeReport struct {
	Source        string     `json:"source"` // "host" or "sim"
	NVML          nvmlPart   `json:"nvml"`
	NVSwitch      switchPart `json:"nvswitch"`
	FabricManager fmPart     `json:"fabric_manager"`
	IMEXDaemon    daemonPart `json:"imex_daemon"`
	// GPUs is each GPU's place in the fabric, as NVML reports it (by NVML's index, which
	// ignores CUDA_VISIBLE_DEVICES; CUDADevice matches it to the devices above by UUID).
	GPUs []gpuFabric `json:"gpus"`
	// Clique is the node's NVLink clique by GPU feature discovery's rule (the value of
	// the nvidia.com/gpu.clique label GFD would set), or why there is none.
	Clique cliqueVerdict `json:"clique"`
	// Problems lists what is wrong, part by part, with its remedy; empty on a sound node.
	Problems []problem `json:"problems"`
}

// The states of a part.
const (
	stateOK        = "ok"         // present and working
	stateProblem   = "problem"    // needed and wrong: see the remedy
	stateDegraded  = "degraded"   // working, below what it should do: see the remedy
	stateNotNeeded = "not-needed" // this node does not need it
	stateUnknown   = "unknown"    // cannot be told from here
)

// part is the verdict on one part of the node.
type part struct {
	State     string `json:"state"`
	Diagnosis string `json:"diagnosis"`
	Remedy    string `json:"remedy,omitempty"`
}

// fine says the part is ok or not needed.
func (p part) fine() bool { return p.State == stateOK || p.State == stateNotNeeded }

// parts are the node's parts but its GPUs, by name, in the order the outputs list them.
func (n *nodeReport) parts() []problem {
	return []problem{{"nvml", n.NVML.part}, {"nvswitch", n.NVSwitch.part}, {"fabric_manager", n.FabricManager.part}, {"imex_daemon", n.IMEXDaemon.part}}
}

type nvmlPart struct {
	Available     bool   `json:"available"`
	Library       string `json:"library,omitempty"`
	DriverVersion string `json:"driver_version,omitempty"`
	part
}

type switchPart struct {
	// DeviceFiles counts /dev/nvidia-nvswitchN, ProcEntries the switches in
	// /proc/driver/nvidia-nvswitch/devices: the NVSwitches this system manages.
	DeviceFiles int `json:"device_files"`
	ProcEntries int `json:"proc_entries"`
	// GPUsLinked counts the GPUs NVML says have an active NVLink to an NVSwitch, wherever
	// the switch is managed.
	GPUsLinked int `json:"gpus_linked"`
	part
}

type fmPart struct {
	// Needed: the GPUs' NVLinks go through NVSwitches, so someone's Fabric Manager must
	// register them; Local: those NVSwitches are this system's, so it runs here.
	Needed bool `json:"needed"`
	Local  bool `json:"local"`
	// Processes are the nv-fabricmanager processes visible from here.
	Processes []int `json:"processes"`
	// Unit is its systemd unit file ("" when not installed), Enabled whether it starts
	// at boot, Listening where its command interface listens ("" when not seen).
	Unit      string `json:"unit,omitempty"`
	Enabled   bool   `json:"enabled"`
	Listening string `json:"listening,omitempty"`
	part
}

type daemonPart struct {
	Processes   []int `json:"processes"`
	NodesConfig bool  `json:"nodes_config"` // /etc/nvidia-imex/nodes_config.cfg exists
	part
}

// gpuFabric is one GPU's registration with the NVLink fabric.
type gpuFabric struct {
	Index      int    `json:"index"` // NVML's
	CUDADevice *int   `json:"cuda_device,omitempty"`
	UUID       string `json:"uuid,omitempty"`
	PCIBusID   string `json:"pci_bus_id,omitempty"`
	// FabricState is the fabric state ("not-supported", "not-started", "in-progress",
	// "completed"), "" when NVML could not say (Unknown then says why).
	FabricState string   `json:"fabric_state,omitempty"`
	Status      string   `json:"fabric_status,omitempty"` // NVML_SUCCESS, ...: meaningful once completed
	ClusterUUID string   `json:"cluster_uuid,omitempty"`
	CliqueID    *uint32  `json:"clique_id,omitempty"`
	Health      []string `json:"health_problems,omitempty"`
	Summary     string   `json:"health_summary,omitempty"`
	LinksTotal  *int     `json:"nvlinks_total,omitempty"`
	LinksActive *int     `json:"nvlinks_active,omitempty"`
	ToNVSwitch  *bool    `json:"nvlinks_to_nvswitch,omitempty"`
	Unknown     string   `json:"unknown,omitempty"`
	part
	registered bool // state completed with status success
	onFabric   bool // in a fabric at all (state other than not-supported)
	cluster    bool // in a multi-node cluster (a cluster UUID other than zero)
}

// problem is one thing wrong with the node: a part in state problem or degraded.
type problem struct {
	Part string `json:"part"` // "nvml", "fabric_manager", "gpu 3", "imex_channels", ...
	part
}

const zeroCluster = "00000000-0000-0000-0000-000000000000"

// readNode reads the fabric picture of sys. imex is the IMEX channel state (read
// separately: it is reported on its own), devs are the CUDA devices (to match NVML's GPUs
// to them), initErr is cuInit's error when the driver loaded but refused.
func readNode(sys system, imex *imexState, devs []deviceInfo, initErr error) *nodeReport {
	sim := sys.Simulated()
	n := &nodeReport{Source: "host", Problems: []problem{}, GPUs: []gpuFabric{}}
	if sim {
		n.Source = "sim"
	}
	nv := sys.NVML()
	n.NVML = nvmlPartOf(nv, sim)
	for _, g := range nv.GPUs {
		n.GPUs = append(n.GPUs, gpuFabricOf(g, devs))
	}
	n.Clique = cliqueOf(nv)
	if sys.Linux() {
		n.NVSwitch.DeviceFiles, n.NVSwitch.ProcEntries = nvswitchDevices(sys)
		procs := processes(sys, fmComm, imexComm)
		n.FabricManager.Processes = procs[fmComm]
		n.FabricManager.Unit, n.FabricManager.Enabled = fmUnitFile(sys)
		n.FabricManager.Listening = fmListening(sys)
		n.IMEXDaemon.Processes = procs[imexComm]
		n.IMEXDaemon.NodesConfig = exists(sys, imexNodesConfig)
	} else {
		n.FabricManager.Processes, n.IMEXDaemon.Processes = []int{}, []int{}
	}
	n.diagnose(sys, imex, devs, initErr)
	return n
}

func nvmlPartOf(nv nvml.Node, sim bool) nvmlPart {
	p := nvmlPart{Library: nv.Library}
	if nv.Unavailable != "" {
		p.State = stateProblem
		p.Diagnosis = nv.Unavailable + ": the GPUs' fabric state cannot be read"
		p.Remedy = fix{do: "NVML (libnvidia-ml.so.1) comes with the driver's utilities; in a container the NVIDIA Container Toolkit " +
			"mounts it when NVIDIA_DRIVER_CAPABILITIES includes utility ({cmd}); " + loader.EnvNVMLPath + " names it if it is elsewhere",
			cmd: "-e NVIDIA_DRIVER_CAPABILITIES=compute,utility"}.text(sim)
		return p
	}
	version := "(driver version unknown)"
	if nv.DriverVersion.Known() {
		version = "of driver " + nv.DriverVersion.Value
	}
	p.Available, p.DriverVersion, p.State = true, nv.DriverVersion.Value, stateOK
	p.Diagnosis = "NVML " + version + " reports " + strconv.Itoa(len(nv.GPUs)) + " GPU(s)"
	return p
}

// fabricStateName is a fabric state as the report writes it: "not-supported", "not-started",
// "in-progress", "completed".
func fabricStateName(s nvml.FabricState) string {
	if s > nvml.GPU_FABRIC_STATE_COMPLETED {
		return "state-" + strconv.Itoa(int(s))
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.String(), "NVML_GPU_FABRIC_STATE_")), "_", "-")
}

// gpuFabricOf takes what NVML says of one GPU; the verdict comes later (diagnose).
func gpuFabricOf(g nvml.GPU, devs []deviceInfo) gpuFabric {
	r := gpuFabric{Index: g.Index, UUID: g.UUID.Value, PCIBusID: g.PCIBusID.Value}
	for _, d := range devs {
		if g.UUID.Known() && d.UUID != "" && strings.EqualFold(d.UUID, g.UUID.Value) {
			r.CUDADevice = intp(d.Index)
		}
	}
	if l := g.NvLinks; l.Known() {
		r.LinksTotal, r.LinksActive = intp(l.Value.Total), intp(l.Value.Active)
		if l.Value.ToNVSwitch.Known() {
			v := l.Value.ToNVSwitch.Value
			r.ToNVSwitch = &v
		}
	}
	f := g.Fabric
	if !f.Known() {
		r.Unknown = f.Why
		if f.Code == nvml.ERROR_NOT_SUPPORTED {
			r.FabricState = fabricStateName(nvml.GPU_FABRIC_STATE_NOT_SUPPORTED)
		}
		return r
	}
	v := f.Value
	r.FabricState = fabricStateName(v.State)
	r.onFabric = v.State != nvml.GPU_FABRIC_STATE_NOT_SUPPORTED
	if !r.onFabric {
		return r
	}
	r.Status = v.Status.Name()
	r.ClusterUUID = v.ClusterUUID
	clique := v.CliqueID
	r.CliqueID = &clique
	r.registered = v.Registered()
	r.cluster = v.ClusterUUID != "" && v.ClusterUUID != zeroCluster
	if v.Health.Known() {
		r.Health = v.Health.Value.Problems()
	}
	if v.Summary.Known() {
		r.Summary = strings.TrimPrefix(v.Summary.Value.String(), "NVML_GPU_FABRIC_HEALTH_SUMMARY_")
	}
	return r
}

// diagnose gives each part its verdict, in the order the parts depend on each other: the
// GPUs' registration says whether Fabric Manager did its work.
func (n *nodeReport) diagnose(sys system, imex *imexState, devs []deviceInfo, initErr error) {
	sim := sys.Simulated()
	fx := func(do, cmd string) string { return fix{do: do, cmd: cmd}.text(sim) }
	driver := "the driver's"
	if n.NVML.DriverVersion != "" {
		driver = n.NVML.DriverVersion
	}
	notReady := errors.Is(initErr, cu.ERROR_SYSTEM_NOT_READY)

	// NVSwitches: this system's, or reached through the GPUs' links.
	sw := &n.NVSwitch
	onFabric, cluster := false, false
	for _, g := range n.GPUs {
		if g.ToNVSwitch != nil && *g.ToNVSwitch {
			sw.GPUsLinked++
		}
		onFabric = onFabric || g.onFabric
		cluster = cluster || g.cluster
	}
	local := sw.DeviceFiles > 0 || sw.ProcEntries > 0
	// Without NVML the fabric cannot be read: that is a problem where there is a fabric to
	// read (NVSwitches here, multicast-capable devices, cuInit waiting for the fabric).
	if !n.NVML.Available && !local && len(multicastDevices(devs)) == 0 && !notReady {
		n.NVML.State = stateUnknown
		n.NVML.Diagnosis += " (nothing here suggests an NVLink fabric)"
	}
	switch {
	case !sys.Linux():
		sw.part = part{State: stateUnknown, Diagnosis: "NVSwitches are read on Linux only"}
	case local:
		sw.part = part{State: stateOK, Diagnosis: fmt.Sprintf("this system manages %d NVSwitch(es)", max(sw.DeviceFiles, sw.ProcEntries))}
	case sw.GPUsLinked > 0:
		sw.part = part{State: stateOK, Diagnosis: fmt.Sprintf("%d GPU(s) have NVLinks to NVSwitches that this system does not manage "+
			"(a container or VM of their host, or the switch trays of a multi-node NVLink system)", sw.GPUsLinked)}
	case onFabric:
		sw.part = part{State: stateOK, Diagnosis: "no NVSwitch is visible, but the GPUs are on an NVLink fabric"}
	default:
		sw.part = part{State: stateNotNeeded, Diagnosis: "no NVSwitch: no GPU has an active NVLink to one"}
	}

	// Each GPU's registration.
	fm := &n.FabricManager
	fm.Local = local
	fm.Needed = local || sw.GPUsLinked > 0 || onFabric || notReady
	// The remedy for GPUs that no Fabric Manager registered.
	fmFix := fx("start Fabric Manager and enable it at boot ({cmd}); its version must equal the driver's ("+driver+")", fmStart)
	switch {
	case !local && sw.GPUsLinked > 0 && fm.Unit == "":
		fmFix = fx("the GPUs' NVSwitches are managed outside this system: on their host (or the NVSwitch trays), start nvidia-fabricmanager of the driver's version ("+driver+")", "")
	case fm.Unit == "":
		fmFix = fx("install nvidia-fabricmanager of the driver's version ("+driver+") and start it ({cmd})", fmStart)
	}
	unregistered := 0
	for i := range n.GPUs {
		g := &n.GPUs[i]
		name := "GPU " + strconv.Itoa(g.Index)
		switch {
		case g.FabricState == "" && g.Unknown != "":
			g.part = part{State: stateUnknown, Diagnosis: name + "'s fabric state is unknown: " + g.Unknown}
		case !g.onFabric:
			g.part = part{State: stateNotNeeded, Diagnosis: name + " is not on an NVLink fabric"}
		case g.FabricState == "not-started":
			unregistered++
			g.part = part{State: stateProblem, Diagnosis: name + " has not started its fabric registration: no Fabric Manager has reached it", Remedy: fmFix}
		case g.FabricState == "in-progress":
			unregistered++
			g.part = part{State: stateProblem, Diagnosis: name + "'s fabric registration is in progress",
				Remedy: fx("wait: Fabric Manager registers the GPUs in the seconds after it starts; if this stays, read its log ({cmd})", fmLog)}
		case !g.registered:
			unregistered++
			g.part = part{State: stateProblem, Diagnosis: name + "'s fabric registration failed: " + g.Status,
				Remedy: fx("read Fabric Manager's log ({cmd}); its version must equal the driver's ("+driver+"); restart it, then reset the GPUs or reboot", fmLog)}
		case g.Summary == "UNHEALTHY" || hasAny(g.Health, "ROUTE_UNHEALTHY", "INCORRECT_CONFIGURATION"):
			g.part = part{State: stateProblem, Diagnosis: name + "'s fabric is unhealthy: " + g.healthText(), Remedy: degradedFix.text(sim)}
		case len(g.Health) > 0 || g.Summary == "LIMITED_CAPACITY" || g.linksDown():
			g.part = part{State: stateDegraded, Diagnosis: name + "'s fabric is degraded: " + g.healthText(), Remedy: degradedFix.text(sim)}
		default:
			g.part = part{State: stateOK, Diagnosis: name + " is registered with the fabric" + g.cliqueText()}
		}
	}

	// Fabric Manager: did it register the GPUs?
	visible := len(fm.Processes) > 0
	switch {
	case !sys.Linux():
		fm.part = part{State: stateUnknown, Diagnosis: "Fabric Manager is read on Linux only"}
	case !fm.Needed:
		fm.part = part{State: stateNotNeeded, Diagnosis: "no GPU is on an NVLink fabric"}
	case notReady && !visible:
		fm.part = part{State: stateProblem, Diagnosis: "Fabric Manager is not running (no nv-fabricmanager process" + n.fmEvidence() +
			"), and cuInit fails with CUDA_ERROR_SYSTEM_NOT_READY: no CUDA program can run on this node", Remedy: fmFix}
	case unregistered > 0 && local && !visible:
		fm.part = part{State: stateProblem, Diagnosis: fmt.Sprintf("Fabric Manager is not running (no nv-fabricmanager process%s): %d GPU(s) are not registered",
			n.fmEvidence(), unregistered), Remedy: fmFix}
	case unregistered > 0 && visible:
		fm.part = part{State: stateProblem, Diagnosis: fmt.Sprintf("Fabric Manager runs (process %s) but %d GPU(s) are not registered",
			joinInts(fm.Processes), unregistered), Remedy: fx("read its log ({cmd}); its version must equal the driver's ("+driver+")", fmLog)}
	case unregistered > 0:
		fm.part = part{State: stateProblem, Diagnosis: fmt.Sprintf("%d GPU(s) are not registered with the fabric, whose Fabric Manager "+
			"runs outside this system", unregistered), Remedy: fmFix}
	case !n.NVML.Available && !visible:
		fm.part = part{State: stateUnknown, Diagnosis: "no nv-fabricmanager process is visible from here, and without NVML the GPUs' registration cannot be read"}
	case !n.NVML.Available:
		fm.part = part{State: stateOK, Diagnosis: "Fabric Manager runs (process " + joinInts(fm.Processes) + "); without NVML the GPUs' registration cannot be read"}
	case visible:
		fm.part = part{State: stateOK, Diagnosis: "Fabric Manager runs (process " + joinInts(fm.Processes) + ") and every GPU on the fabric is registered"}
	default:
		fm.part = part{State: stateOK, Diagnosis: "every GPU on the fabric is registered (Fabric Manager runs outside what this process can see)"}
	}

	// The IMEX daemon: cross-node sharing of fabric memory needs it.
	d := &n.IMEXDaemon
	switch {
	case !sys.Linux():
		d.part = part{State: stateUnknown, Diagnosis: "the IMEX daemon is read on Linux only"}
	case len(d.Processes) > 0:
		d.part = part{State: stateOK, Diagnosis: "nvidia-imex runs (process " + joinInts(d.Processes) + ")"}
	case cluster:
		d.part = part{State: stateUnknown, Diagnosis: "the GPUs are in a multi-node NVLink cluster and no nvidia-imex process is visible from here: " +
			"sharing fabric memory with other nodes needs it (in Kubernetes it runs in the DRA driver's ComputeDomain pods)",
			Remedy: fx("start the IMEX daemon with the domain's nodes in "+imexNodesConfig+" ({cmd}); in Kubernetes, create a ComputeDomain", "sudo systemctl enable --now nvidia-imex")}
	default:
		d.part = part{State: stateNotNeeded, Diagnosis: "it shares fabric memory across nodes, and no GPU is in a multi-node cluster"}
	}

	// Gather the problems; an IMEX channel is one only where fabric memory is expected.
	add := func(name string, p part) {
		if p.State == stateProblem || p.State == stateDegraded {
			n.Problems = append(n.Problems, problem{name, p})
		}
	}
	for _, p := range n.parts() {
		add(p.Part, p.part)
	}
	for _, g := range n.GPUs {
		add("gpu "+strconv.Itoa(g.Index), g.part)
	}
	if imex != nil && !imex.Ready && (cluster || len(d.Processes) > 0) {
		intent := "they are in a multi-node NVLink cluster"
		if len(d.Processes) > 0 {
			intent = "the IMEX daemon runs"
		}
		add("imex_channels", part{State: stateProblem, Diagnosis: "the GPUs are set up for fabric memory (" + intent +
			") but this process has no IMEX channel: " + imex.Diagnosis, Remedy: imex.Remedy})
	}
}

// fmEvidence lists what else says Fabric Manager is not there, each after ", ".
func (n *nodeReport) fmEvidence() string {
	var e string
	fm := n.FabricManager
	if fm.Unit == "" {
		e += ", no " + fmUnit
	} else if !fm.Enabled {
		e += ", " + fmUnit + " not enabled"
	}
	if fm.Listening == "" {
		e += ", nothing listening on its command port"
	}
	return e
}

// Fabric Manager's log, and how to start it, as remedies name them.
const (
	fmLog   = "journalctl -u nvidia-fabricmanager, /var/log/fabricmanager.log"
	fmStart = "sudo systemctl enable --now nvidia-fabricmanager"
)

// degradedFix is the remedy for a fabric that registered but is not whole.
var degradedFix = fix{do: "check the GPU's NVLinks and fabric health ({cmd}) and the kernel log for Xid errors; drain the node for service if it persists",
	cmd: "nvidia-smi nvlink -s; nvidia-smi -q -d FABRIC"}

func (g gpuFabric) linksDown() bool {
	return g.LinksTotal != nil && g.LinksActive != nil && *g.LinksActive < *g.LinksTotal && *g.LinksActive > 0
}

func (g gpuFabric) healthText() string {
	var parts []string
	for _, h := range g.Health {
		parts = append(parts, strings.TrimPrefix(h, "NVML_GPU_FABRIC_HEALTH_MASK_"))
	}
	if g.Summary != "" && g.Summary != "HEALTHY" && g.Summary != "NOT_SUPPORTED" {
		parts = append(parts, "summary "+g.Summary)
	}
	if g.linksDown() {
		parts = append(parts, fmt.Sprintf("%d of %d NVLinks active", *g.LinksActive, *g.LinksTotal))
	}
	return strings.Join(parts, ", ")
}

func (g gpuFabric) cliqueText() string {
	if g.CliqueID == nil {
		return ""
	}
	if g.cluster {
		return fmt.Sprintf(" (cluster %s, clique %d)", g.ClusterUUID, *g.CliqueID)
	}
	return fmt.Sprintf(" (clique %d)", *g.CliqueID)
}

func hasAny(list []string, subs ...string) bool {
	for _, s := range list {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
	}
	return false
}

// What the fabric picture looks for on a node, and where.
const (
	// fmComm is nv-fabricmanager's process name as /proc/PID/comm shows it (truncated to
	// 15 characters by the kernel).
	fmComm = "nv-fabricmanage"
	// fmConfig is Fabric Manager's configuration; its FM_CMD_PORT_NUMBER (6666 when
	// absent) is the TCP port its command interface listens on, FM_CMD_UNIX_SOCKET_PATH a
	// Unix socket that replaces it when set.
	fmConfig      = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
	fmDefaultPort = 6666
	fmUnit        = "nvidia-fabricmanager.service"
	// imexComm is the IMEX daemon's process name.
	imexComm = "nvidia-imex"
	// imexNodesConfig lists the nodes of an IMEX domain.
	imexNodesConfig = "/etc/nvidia-imex/nodes_config.cfg"
	// nvswitchProcDir has one entry per NVSwitch the nvidia-nvswitch driver manages.
	nvswitchProcDir = "/proc/driver/nvidia-nvswitch/devices"
)

// fmUnitDirs are where systemd looks for unit files, the administrator's first.
var fmUnitDirs = []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// processes returns the ids of the processes whose /proc/PID/comm is one of names, by
// name (an empty list for a name none has). Only what this process can see is found: in a
// container with its own process namespace, the host's daemons are not there.
func processes(sys system, names ...string) map[string][]int {
	found := map[string][]int{}
	for _, n := range names {
		found[n] = []int{}
	}
	ents, err := sys.ReadDir("/proc")
	if err != nil {
		return found
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e)
		if err != nil || pid <= 0 {
			continue
		}
		comm, err := sys.ReadFile("/proc/" + e + "/comm")
		if err != nil || len(comm) > 64 {
			continue
		}
		c := strings.TrimSpace(string(comm))
		for _, n := range names {
			if c == n {
				found[n] = append(found[n], pid)
			}
		}
	}
	return found
}

// fmListening says where Fabric Manager's command interface listens, if it does: the Unix
// socket its configuration names, or its TCP port in /proc/net/tcp (of this network
// namespace).
func fmListening(sys system) string {
	port := fmDefaultPort
	if cfg, err := sys.ReadFile(fmConfig); err == nil {
		vals := keyValues(cfg, "=")
		if p, err := strconv.Atoi(vals["FM_CMD_PORT_NUMBER"]); err == nil && p > 0 && p < 1<<16 {
			port = p
		}
		if sock := vals["FM_CMD_UNIX_SOCKET_PATH"]; strings.HasPrefix(sock, "/") {
			if fi, err := sys.Stat(sock); err == nil && fi.Mode&fs.ModeSocket != 0 {
				return "unix socket " + sock
			}
			return ""
		}
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if data, err := sys.ReadFile(f); err == nil && tcpListening(data, port) {
			return "tcp port " + strconv.Itoa(port)
		}
	}
	return ""
}

// keyValues parses KEY<sep>VALUE lines, skipping comments.
func keyValues(data []byte, sep string) map[string]string {
	vals := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), sep); ok && !strings.HasPrefix(k, "#") {
			vals[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return vals
}

// tcpListening reports whether a /proc/net/tcp table has a socket listening on port
// ("sl local_address rem_address st ...": the local address is HEXIP:HEXPORT, LISTEN is
// state 0A).
func tcpListening(data []byte, port int) bool {
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
			return true
		}
	}
	return false
}

// fmUnitFile returns the path of Fabric Manager's systemd unit file and whether it is
// enabled (linked into multi-user.target.wants), "" when it is not installed.
func fmUnitFile(sys system) (string, bool) {
	for _, d := range fmUnitDirs {
		p := d + "/" + fmUnit
		if _, err := sys.Stat(p); err == nil {
			_, err := sys.Stat("/etc/systemd/system/multi-user.target.wants/" + fmUnit)
			return p, err == nil
		}
	}
	return "", false
}

// nvswitchDevices counts the NVSwitch device files in /dev (nvidia-nvswitch0, ...; not
// the control file nvidia-nvswitchctl) and the switches in /proc/driver/nvidia-nvswitch.
func nvswitchDevices(sys system) (files, proc int) {
	if names, err := sys.ReadDir("/dev"); err == nil {
		for _, n := range names {
			if num, ok := strings.CutPrefix(n, "nvidia-nvswitch"); ok && isDecimal(num) {
				files++
			}
		}
	}
	if names, err := sys.ReadDir(nvswitchProcDir); err == nil {
		proc = len(names)
	}
	return files, proc
}

// exists reports whether sys has something at name.
func exists(sys system, name string) bool {
	_, err := sys.Stat(name)
	return err == nil
}
