package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"strconv"
	"strings"
)

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
// name. Only what this process can see is found: in a container with its own process
// namespace, the host's daemons are not there.
func processes(sys system, names ...string) map[string][]int {
	found := map[string][]int{}
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
		vals := keyValues(cfg)
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

// keyValues parses KEY=VALUE lines, skipping comments.
func keyValues(data []byte) map[string]string {
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			vals[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return vals
}

// tcpListening reports whether a /proc/net/tcp table has a socket listening on port
// ("sl local_address rem_address st ...": the local address is HEXIP:HEXPORT, LISTEN is
// state 0A).
func tcpListening(data []byte, port int) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
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
