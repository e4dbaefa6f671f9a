package main

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// imexChannelDir is where the nvidia module's IMEX channel device files live. Creating or
// importing memory with fabric handles needs one of them (and, across nodes, the
// nvidia-imex daemon); without one cuMemCreate returns CUDA_ERROR_NOT_PERMITTED even
// though the device attribute says fabric handles are supported.
const imexChannelDir = "/dev/nvidia-caps-imex-channels"

// imexProcName is the character device name the nvidia module registers in /proc/devices.
const imexProcName = "nvidia-caps-imex-channels"

// imexState is what this node offers for IMEX channels.
type imexState struct {
	// Source is "host" (read from this machine's /proc, /sys and /dev) or "sim" (read from
	// the files of the simulated node, simNodeOf and sim.Config.IMEX).
	Source string `json:"source"`
	// Major is the character device major number of nvidia-caps-imex-channels in
	// /proc/devices; 0 when it is not listed.
	Major int `json:"major"`
	// ChannelCount is the nvidia module parameter NVreg_ImexChannelCount, absent when it
	// could not be read.
	ChannelCount *int `json:"channel_count_param,omitempty"`
	// CreateChannel0 is the module parameter NVreg_CreateImexChannel0, absent when it could
	// not be read.
	CreateChannel0 *bool `json:"create_channel0_param,omitempty"`
	// DirPresent says whether /dev/nvidia-caps-imex-channels exists.
	DirPresent bool `json:"channel_dir_present"`
	// ChannelFiles counts the channelN entries of the directory; Channels describes the
	// first 16 of them.
	ChannelFiles int           `json:"channel_files"`
	Channels     []imexChannel `json:"channels"`
	// Ready is true when at least one channel file is a character device of the right major
	// number that this process can open.
	Ready bool `json:"ready"`
	// Diagnosis says in one sentence what was found; Remedy what an operator can do about
	// it ("" when Ready).
	Diagnosis string `json:"diagnosis"`
	Remedy    string `json:"remedy,omitempty"`
}

// imexChannel is one /dev/nvidia-caps-imex-channels/channelN file.
type imexChannel struct {
	Name       string `json:"name"`
	Mode       string `json:"mode"`
	Accessible bool   `json:"accessible"`
	// Problem says why the channel is not usable ("" when Accessible).
	Problem string `json:"problem,omitempty"`
}

const maxListedChannels = 16

// diagnose fills Ready, Diagnosis and Remedy from what was read; on a simulated node the
// remedy names no command.
func (s *imexState) diagnose(simulated bool) {
	s.Ready = false
	for _, c := range s.Channels {
		if c.Accessible {
			s.Ready = true
			s.Diagnosis = fmt.Sprintf("IMEX channel %s/%s is present and accessible", imexChannelDir, c.Name)
			s.Remedy = ""
			return
		}
	}
	// The major number in a command: the registered one, or a command that prints it.
	major := "$(awk '/" + imexProcName + "/{print $1}' /proc/devices)"
	if s.Major > 0 {
		major = fmt.Sprint(s.Major)
	}
	// How to give the node an IMEX channel, after what comes first.
	f := fix{do: "create channel 0 ({cmd}), or load the nvidia module with NVreg_CreateImexChannel0=1; in Kubernetes, request a channel " +
		"through the NVIDIA DRA driver (ComputeDomain); sharing across nodes also needs the nvidia-imex daemon",
		cmd: fmt.Sprintf("sudo mkdir -p %[1]s && sudo mknod -m 666 %[1]s/channel0 c %[2]s 0", imexChannelDir, major)}
	switch {
	case s.ChannelCount != nil && *s.ChannelCount == 0:
		s.Diagnosis = "IMEX channels are disabled: the nvidia module was loaded with NVreg_ImexChannelCount=0"
		f.do = "reload the nvidia module without NVreg_ImexChannelCount=0 (the default is 2048), then " + f.do
	case s.Major == 0:
		s.Diagnosis = "/proc/devices does not list " + imexProcName + ": the loaded nvidia module has no IMEX channel support"
		f.do = "install an NVIDIA driver with IMEX channels (R550 or newer) and load its nvidia module, then " + f.do
	case !s.DirPresent:
		s.Diagnosis = fmt.Sprintf("no IMEX channel: %s (major %d) is registered but %s does not exist", imexProcName, s.Major, imexChannelDir)
	case s.ChannelFiles == 0:
		s.Diagnosis = fmt.Sprintf("no IMEX channel: %s has no channel files", imexChannelDir)
	default:
		var probs []string
		for _, c := range s.Channels {
			probs = append(probs, c.Name+": "+c.Problem)
		}
		s.Diagnosis = "no usable IMEX channel: " + strings.Join(probs, "; ")
		f = fix{do: fmt.Sprintf("give this user read-write access to a channel file ({cmd}), "+
			"or make sure it is a character device with major %s; in a container, pass the device "+
			"(--device %s/channel0)", major, imexChannelDir), cmd: "chmod/chgrp " + imexChannelDir + "/channel0"}
	}
	s.Remedy = f.text(simulated)
}

// readIMEX reads the IMEX channel state of sys: /proc/devices, the nvidia module's
// parameters and /dev/nvidia-caps-imex-channels. Nil off Linux, where there are none.
func readIMEX(sys system) *imexState {
	if !sys.Linux() {
		return nil
	}
	s := &imexState{Source: "host", Channels: []imexChannel{}}
	if sys.Simulated() {
		s.Source = "sim"
	}
	if data, err := sys.ReadFile("/proc/devices"); err == nil {
		s.Major = procDevicesMajor(data, imexProcName)
	}
	s.ChannelCount, s.CreateChannel0 = moduleParams(sys)

	names, err := sys.ReadDir(imexChannelDir)
	s.DirPresent = err == nil
	var channels []string
	for _, n := range names {
		if num, ok := strings.CutPrefix(n, "channel"); ok && isDecimal(num) {
			channels = append(channels, n)
		}
	}
	// channel0, channel1, ..., channel10: by number, not by string.
	num := func(n string) int {
		v, _ := strconv.Atoi(strings.TrimPrefix(n, "channel"))
		return v
	}
	sort.Slice(channels, func(i, j int) bool { return num(channels[i]) < num(channels[j]) })
	s.ChannelFiles = len(channels)
	for _, name := range channels[:min(len(channels), maxListedChannels)] {
		s.Channels = append(s.Channels, inspectChannel(sys, imexChannelDir+"/"+name, name, s.Major))
	}
	s.diagnose(sys.Simulated())
	return s
}

// isDecimal reports whether s is a short run of decimal digits: a channel number.
func isDecimal(s string) bool { return s != "" && len(s) <= 9 && strings.Trim(s, "0123456789") == "" }

// procDevicesMajor returns the major number /proc/devices gives a character device name,
// 0 when it is not listed (or not as a sane number).
func procDevicesMajor(data []byte, name string) int {
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "Block devices:" {
			break
		}
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == name {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 0 && n < 1<<12 {
				return n
			}
		}
	}
	return 0
}

// moduleParams reads NVreg_ImexChannelCount and NVreg_CreateImexChannel0 from
// /proc/driver/nvidia/params ("ImexChannelCount: 2048"), or else from
// /sys/module/nvidia/parameters/.
func moduleParams(sys system) (count *int, create0 *bool) {
	data, _ := sys.ReadFile("/proc/driver/nvidia/params")
	vals := keyValues(data, ":")
	for _, k := range []string{"ImexChannelCount", "CreateImexChannel0"} {
		if _, ok := vals[k]; ok {
			continue
		}
		if data, err := sys.ReadFile("/sys/module/nvidia/parameters/NVreg_" + k); err == nil {
			vals[k] = strings.TrimSpace(string(data))
		}
	}
	if v, err := strconv.Atoi(vals["ImexChannelCount"]); err == nil && v >= 0 {
		count = &v
	}
	if v, err := strconv.Atoi(vals["CreateImexChannel0"]); err == nil {
		b := v != 0
		create0 = &b
	}
	return count, create0
}

// inspectChannel checks that a channel file is a character device of the registered major
// number and that this process can open it (opening a channel file has no side effect; it
// is what the driver does).
func inspectChannel(sys system, path, name string, major int) imexChannel {
	c := imexChannel{Name: name}
	fi, err := sys.Stat(path)
	if err != nil {
		c.Problem = unwrapPathErr(err)
		return c
	}
	c.Mode = fi.Mode.String()
	if fi.Mode&fs.ModeCharDevice == 0 {
		c.Problem = "not a character device"
		return c
	}
	if major > 0 && int(fi.Major) != major {
		c.Problem = fmt.Sprintf("major number %d, but %s is %d", fi.Major, imexProcName, major)
		return c
	}
	if err := sys.CanOpen(path); err != nil {
		c.Problem = "cannot open: " + unwrapPathErr(err)
		return c
	}
	c.Accessible = true
	return c
}

func unwrapPathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
