package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

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
	if err == nil {
		s.DirPresent = true
	}
	var channels []string
	for _, n := range names {
		if num, ok := strings.CutPrefix(n, "channel"); ok && isDecimal(num) {
			channels = append(channels, n)
		}
	}
	// channel0, channel1, ..., channel10: by number, not by string.
	sort.Slice(channels, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(channels[i], "channel"))
		b, _ := strconv.Atoi(strings.TrimPrefix(channels[j], "channel"))
		return a < b
	})
	s.ChannelFiles = len(channels)
	for _, name := range channels {
		if len(s.Channels) == maxListedChannels {
			break
		}
		s.Channels = append(s.Channels, inspectChannel(sys, imexChannelDir+"/"+name, name, s.Major))
	}
	s.diagnose(sys.Simulated())
	return s
}

// isDecimal reports whether s is a short run of decimal digits: a channel number.
func isDecimal(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// procDevicesMajor returns the major number /proc/devices gives a character device name,
// 0 when it is not listed (or not as a sane number).
func procDevicesMajor(data []byte, name string) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
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
	vals := map[string]string{}
	if data, err := sys.ReadFile("/proc/driver/nvidia/params"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok {
				vals[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
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
