package main

import (
	"fmt"
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
	major := imexMajorUnknown
	if s.Major > 0 {
		major = fmt.Sprint(s.Major)
	}
	var f fix
	switch {
	case s.ChannelCount != nil && *s.ChannelCount == 0:
		s.Diagnosis = "IMEX channels are disabled: the nvidia module was loaded with NVreg_ImexChannelCount=0"
		f = fix{do: "reload the nvidia module without NVreg_ImexChannelCount=0 (the default is 2048), then " + imexCreateFix.do, cmd: imexCreateCmd(major)}
	case s.Major == 0:
		s.Diagnosis = "/proc/devices does not list " + imexProcName + ": the loaded nvidia module has no IMEX channel support"
		f = fix{do: "install an NVIDIA driver with IMEX channels (R550 or newer) and load its nvidia module, then " + imexCreateFix.do, cmd: imexCreateCmd(major)}
	case !s.DirPresent:
		s.Diagnosis = fmt.Sprintf("no IMEX channel: %s (major %d) is registered but %s does not exist", imexProcName, s.Major, imexChannelDir)
		f = fix{do: imexCreateFix.do, cmd: imexCreateCmd(major)}
	case s.ChannelFiles == 0:
		s.Diagnosis = fmt.Sprintf("no IMEX channel: %s has no channel files", imexChannelDir)
		f = fix{do: imexCreateFix.do, cmd: imexCreateCmd(major)}
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

// imexMajorUnknown stands for the major number in a command when it is not known here.
const imexMajorUnknown = "$(awk '/" + imexProcName + "/{print $1}' /proc/devices)"

// imexCreateFix says how to give the node an IMEX channel; its command is imexCreateCmd.
var imexCreateFix = fix{do: "create channel 0 ({cmd}), " +
	"or load the nvidia module with NVreg_CreateImexChannel0=1; in Kubernetes, request a channel " +
	"through the NVIDIA DRA driver (ComputeDomain); sharing across nodes also needs the nvidia-imex daemon"}

// imexCreateCmd creates channel 0, major being the registered major number (or a command
// that prints it).
func imexCreateCmd(major string) string {
	return fmt.Sprintf("sudo mkdir -p %[1]s && sudo mknod -m 666 %[1]s/channel0 c %[2]s 0", imexChannelDir, major)
}
