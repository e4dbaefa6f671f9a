package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostIMEX reads this machine's IMEX channel state.
func hostIMEX() *imexState { return readIMEX("") }

// readIMEX reads the IMEX channel state from the files under root ("" for the real root;
// tests pass a directory laid out like one).
func readIMEX(root string) *imexState {
	s := &imexState{Source: "host", Channels: []imexChannel{}}
	if data, err := os.ReadFile(root + "/proc/devices"); err == nil {
		s.Major = procDevicesMajor(data, imexProcName)
	}
	s.ChannelCount, s.CreateChannel0 = moduleParams(root)

	dir := root + imexChannelDir
	ents, err := os.ReadDir(dir)
	if err == nil {
		s.DirPresent = true
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "channel") {
			names = append(names, e.Name())
		}
	}
	// channel0, channel1, ..., channel10: by number, not by string.
	sort.Slice(names, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(names[i], "channel"))
		b, _ := strconv.Atoi(strings.TrimPrefix(names[j], "channel"))
		return a < b
	})
	s.ChannelFiles = len(names)
	for _, name := range names {
		if len(s.Channels) == maxListedChannels {
			break
		}
		s.Channels = append(s.Channels, inspectChannel(filepath.Join(dir, name), name, s.Major))
	}
	s.diagnose()
	return s
}

// procDevicesMajor returns the major number /proc/devices gives a character device name,
// 0 when it is not listed.
func procDevicesMajor(data []byte, name string) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "Block devices:" {
			break
		}
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == name {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 0
}

// moduleParams reads NVreg_ImexChannelCount and NVreg_CreateImexChannel0 from
// /proc/driver/nvidia/params ("ImexChannelCount: 2048"), or else from
// /sys/module/nvidia/parameters/.
func moduleParams(root string) (count *int, create0 *bool) {
	vals := map[string]string{}
	if data, err := os.ReadFile(root + "/proc/driver/nvidia/params"); err == nil {
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
		if data, err := os.ReadFile(root + "/sys/module/nvidia/parameters/NVreg_" + k); err == nil {
			vals[k] = strings.TrimSpace(string(data))
		}
	}
	if v, err := strconv.Atoi(vals["ImexChannelCount"]); err == nil {
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
func inspectChannel(path, name string, major int) imexChannel {
	c := imexChannel{Name: name}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		c.Problem = err.Error()
		return c
	}
	fi, err := os.Stat(path)
	if err == nil {
		c.Mode = fi.Mode().String()
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		c.Problem = "not a character device"
		return c
	}
	if m := int(unix.Major(uint64(st.Rdev))); major > 0 && m != major {
		c.Problem = fmt.Sprintf("major number %d, but %s is %d", m, imexProcName, major)
		return c
	}
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		c.Problem = "cannot open: " + unwrapPathErr(err)
		return c
	}
	f.Close()
	c.Accessible = true
	return c
}

func unwrapPathErr(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
