package checkpoint

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Report is what a preflight sees of a process from outside it, through /proc.
type Report struct {
	Pid   int    `json:"pid"`
	Comm  string `json:"comm,omitempty"`
	State string `json:"state,omitempty"` // /proc/PID/stat's state letter: R, S, D, T, t, Z, ...
	// CUDA says whether libcuda is mapped in the process.
	CUDA bool `json:"cuda"`
	// GPUs are the minors of the /dev/nvidiaN files the process has open, and GPUUUIDs
	// their UUIDs in the same order, from /proc/driver/nvidia/gpus ("" where not found).
	GPUs     []int    `json:"gpus"`
	GPUUUIDs []string `json:"gpu_uuids"`
	// Control counts its /dev/nvidiactl descriptors: the driver's own (one, recorded on an
	// H200 with driver 580, none once checkpointed), and one more for each VMM allocation
	// it exported or imported as a POSIX descriptor and still holds the descriptor of (the
	// driver opens every export on /dev/nvidiactl).
	Control int `json:"nvidiactl_fds"`
	// Resident is its anonymous and shared resident host memory (RssAnon + RssShmem, not
	// the file pages VmRSS counts too), which holds a checkpointed process's GPU memory:
	// what a restore needs on the device is at most about this.
	Resident uint64 `json:"resident_bytes"`
	// DmaBufs counts its dma-buf descriptors: memory shared with a NIC or another process.
	DmaBufs int `json:"dma_buf_fds"`
	// Hazards are what would make a checkpoint fail or lose something, each with its
	// remedy; none for a process that can be checkpointed as far as can be told.
	Hazards []Hazard `json:"hazards"`
	// Warnings are signs of a hazard that other causes give too (NVML, for one, opens
	// /dev/nvidiactl as well): worth a look, not a reason to refuse.
	Warnings []Hazard `json:"warnings"`
}

// Hazard is one reason a checkpoint may fail, and what to do about it.
type Hazard struct {
	What   string `json:"what"`
	Remedy string `json:"remedy"`
}

var nvidiaMinorRE = regexp.MustCompile(`^/dev/nvidia(\d+)$`)

// Preflight looks at process pid in fsys, the machine's root (os.DirFS("/") in
// production): whether it exists and runs, whether it is a CUDA process, which GPUs it has
// open, and whether it holds descriptors that share GPU memory. It reads only.
func Preflight(fsys fs.FS, pid int) Report {
	r := Report{Pid: pid, GPUs: []int{}, GPUUUIDs: []string{}, Hazards: []Hazard{}, Warnings: []Hazard{}}
	dir := path.Join("proc", strconv.Itoa(pid))
	var err error
	if r.Comm, r.State, err = procStat(fsys, pid); err != nil {
		r.Hazards = append(r.Hazards, Hazard{"no process " + strconv.Itoa(pid) + " (" + err.Error() + ")", "name a running process; in a container, share the host's pid namespace (hostPID)"})
		return r
	}
	exited := r.State == "Z" || r.State == "X"
	if stopped(fsys, pid) {
		r.State = "T"
	}
	switch {
	case r.State == "T" || r.State == "t":
		r.Hazards = append(r.Hazards, Hazard{"the process is stopped (SIGSTOP, a tracer or a frozen cgroup): the driver's lock of a stopped process does not return, whatever its timeout", "continue it (kill -CONT " + strconv.Itoa(pid) + ", or thaw its cgroup) before the checkpoint; the lock stops its CUDA calls"})
	case exited && threads(fsys, pid) > 0:
		r.Hazards = append(r.Hazards, Hazard{"its main thread has exited while other threads run: /proc shows little of such a process (its maps, its descriptors), and what the driver does with it was not recorded", "checkpoint a process whose main thread runs"})
	case exited:
		r.Hazards = append(r.Hazards, Hazard{"the process has exited", "name a running process"})
	}
	r.Resident = resident(fsys, pid)
	r.CUDA = mapsLibcuda(fsys, path.Join(dir, "maps"))
	if !r.CUDA {
		r.Hazards = append(r.Hazards, Hazard{"libcuda is not mapped in the process: it is no CUDA process (or /proc/PID/maps cannot be read from here)", "name the process that uses the GPU; reading another user's maps needs the same user or root"})
	}
	ents, err := fs.ReadDir(fsys, path.Join(dir, "fd"))
	if err != nil {
		r.Hazards = append(r.Hazards, Hazard{"its descriptors cannot be read (" + err.Error() + ")", "run as the process's user or root"})
		return r
	}
	gpus := map[int]bool{}
	for _, e := range ents {
		target, err := fs.ReadLink(fsys, path.Join(dir, "fd", e.Name()))
		if err != nil {
			continue
		}
		switch {
		case target == "/dev/nvidiactl":
			r.Control++
		case strings.HasPrefix(target, "anon_inode:dmabuf") || strings.HasPrefix(target, "/dmabuf:"):
			r.DmaBufs++
		default:
			if m := nvidiaMinorRE.FindStringSubmatch(target); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil {
					gpus[n] = true
				}
			}
		}
	}
	for g := range gpus {
		r.GPUs = append(r.GPUs, g)
	}
	sort.Ints(r.GPUs)
	uuids := uuidsByMinor(fsys)
	for _, g := range r.GPUs {
		r.GPUUUIDs = append(r.GPUUUIDs, uuids[g])
	}
	if r.Control > 1 {
		r.Warnings = append(r.Warnings, Hazard{strconv.Itoa(r.Control) + " /dev/nvidiactl descriptors where a CUDA process that shares no memory holds 1 (NVML opens one too): VMM memory exported to or imported from another process as POSIX descriptors would be split by a checkpoint, the restored exporter no longer seeing the importer's writes, and an importer's restore fails (NOT_SUPPORTED), leaving it checkpointed for good",
			"if it shares memory, stop first (importers unmap and release what they imported and close the descriptors, the exporter closes its own), or checkpoint neither"})
	}
	if r.DmaBufs > 0 {
		r.Hazards = append(r.Hazards, Hazard{strconv.Itoa(r.DmaBufs) + " dma-buf descriptor(s) open: GPU memory shared with a NIC or another process, which the checkpoint cannot take along",
			"deregister the memory from the NIC and close the dma-bufs before the checkpoint"})
	}
	return r
}

// uuidsByMinor reads each GPU's device minor and UUID from the driver's
// /proc/driver/nvidia/gpus/*/information ("Device Minor:", "GPU UUID:" lines).
func uuidsByMinor(fsys fs.FS) map[int]string {
	m := map[int]string{}
	dirs, _ := fs.ReadDir(fsys, "proc/driver/nvidia/gpus")
	for _, d := range dirs {
		b, err := fs.ReadFile(fsys, path.Join("proc/driver/nvidia/gpus", d.Name(), "information"))
		if err != nil {
			continue
		}
		minor, uuid := -1, ""
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			switch k, v = strings.TrimSpace(k), strings.TrimSpace(v); {
			case !ok:
			case k == "Device Minor":
				if n, err := strconv.Atoi(v); err == nil && n >= 0 {
					minor = n
				}
			case k == "GPU UUID":
				uuid = v
			}
		}
		if minor >= 0 && uuid != "" {
			m[minor] = uuid
		}
	}
	return m
}

// procStat reads process pid's name and state letter from /proc/PID/stat.
func procStat(fsys fs.FS, pid int) (comm, state string, err error) {
	stat, err := fs.ReadFile(fsys, path.Join("proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", "", err
	}
	comm, state = statFields(string(stat))
	return comm, state, nil
}

// statFields reads "pid (comm) S ...": comm may hold spaces and parentheses, so the state
// follows the last ')'.
func statFields(s string) (comm, state string) {
	if i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')'); i >= 0 && j > i {
		comm = s[i+1 : j]
		if f := strings.Fields(s[j+1:]); len(f) > 0 {
			state = f[0]
		}
	}
	return comm, state
}

// resident is process pid's RssAnon + RssShmem (/proc/PID/status), 0 when unknown.
func resident(fsys fs.FS, pid int) uint64 {
	b, err := fs.ReadFile(fsys, path.Join("proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	var sum uint64
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && (f[0] == "RssAnon:" || f[0] == "RssShmem:") && f[2] == "kB" {
			if kb, err := strconv.ParseUint(f[1], 10, 64); err == nil && kb < 1<<40 {
				sum += kb << 10
			}
		}
	}
	return sum
}

// threads counts process pid's threads that have not exited (/proc/PID/task/*/stat).
func threads(fsys fs.FS, pid int) int {
	tasks, _ := fs.ReadDir(fsys, path.Join("proc", strconv.Itoa(pid), "task"))
	n := 0
	for _, t := range tasks {
		b, err := fs.ReadFile(fsys, path.Join("proc", strconv.Itoa(pid), "task", t.Name(), "stat"))
		if err != nil {
			continue
		}
		if _, state := statFields(string(b)); state != "Z" && state != "X" {
			n++
		}
	}
	return n
}

// stopped says whether process pid, or one of its threads, is stopped (SIGSTOP) or
// stopped by a tracer: the threads' /proc/PID/task/TID/stat, the leader's alone when
// they cannot be read; or frozen.
func stopped(fsys fs.FS, pid int) bool {
	isStopped := func(state string) bool { return state == "T" || state == "t" }
	dir := path.Join("proc", strconv.Itoa(pid))
	tasks, err := fs.ReadDir(fsys, path.Join(dir, "task"))
	if err != nil || len(tasks) == 0 {
		_, state, _ := procStat(fsys, pid)
		return isStopped(state) || frozen(fsys, path.Join(dir, "cgroup"))
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil && tid > 0 {
			task := path.Join(dir, "task", t.Name())
			if frozen(fsys, path.Join(task, "cgroup")) { // a thread may have a cgroup of its own
				return true
			}
			b, err := fs.ReadFile(fsys, path.Join(task, "stat"))
			if err != nil {
				continue
			}
			if _, state := statFields(string(b)); isStopped(state) {
				return true
			}
		}
	}
	return false
}

// frozen says whether the cgroup that the /proc cgroup file at name gives is frozen
// (docker pause, a freeze before a checkpoint), which stops a process as SIGSTOP does while
// its state reads D or S: cgroup v2's cgroup.events says "frozen 1" (under /sys/fs/cgroup,
// or /sys/fs/cgroup/unified beside v1's controllers), v1's freezer.state is not THAWED. A
// cgroup outside this process's cgroup namespace (a path with "..") cannot be read, nor can
// one whose path is longer than PATH_MAX: either counts as not frozen.
func frozen(fsys fs.FS, name string) bool {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return false
	}
	read := func(file string) string {
		b, _ := fs.ReadFile(fsys, file)
		return string(b)
	}
	for line := range strings.Lines(string(b)) {
		id, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		controllers, dir, _ := strings.Cut(rest, ":")
		if !strings.HasPrefix(dir, "/") || slices.Contains(strings.Split(dir, "/"), "..") {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			for _, root := range []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"} {
				if strings.Contains("\n"+read(path.Join(root, dir, "cgroup.events")), "\nfrozen 1") {
					return true
				}
			}
		case slices.Contains(strings.Split(controllers, ","), "freezer"):
			if st := strings.TrimSpace(read(path.Join("sys/fs/cgroup/freezer", dir, "freezer.state"))); st != "" && st != "THAWED" {
				return true
			}
		}
	}
	return false
}

// mapsLibcuda reports whether the maps file at name maps libcuda. It reads a block at a
// time and at most maxMaps bytes: the process decides how long the file is (up to
// vm.max_map_count lines, each of a path that may be longer than any buffer).
func mapsLibcuda(fsys fs.FS, name string) bool {
	f, err := fsys.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	needle := []byte("/libcuda.so")
	r := io.LimitReader(f, maxMaps)
	buf := make([]byte, 64<<10)
	keep := 0 // the end of the last block, where needle may begin
	for {
		n, err := r.Read(buf[keep:])
		data := buf[:keep+n]
		if bytes.Contains(data, needle) {
			return true
		}
		if err != nil {
			return false
		}
		keep = min(len(needle)-1, len(data))
		copy(buf, data[len(data)-keep:])
	}
}

// maxMaps is the most of a process's /proc/PID/maps that Preflight reads (a second or so):
// a process of 65,530 mappings of 1 KiB paths has 64 MiB.
const maxMaps = 64 << 20
