package main

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNode is a node made of files: path -> content (regular files).
func fakeNode(files map[string]string) *memSystem {
	m := newMemSystem(false)
	for p, content := range files {
		m.add(p, memFile{data: content})
	}
	return m
}

// charDev is a character device file with a major number.
func charDev(major uint32) memFile {
	return memFile{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, major: major}
}

const procDevices = `Character devices:
  1 mem
195 nvidia
234 nvidia-caps-imex-channels
237 nvidia-caps
509 nvidia-uvm

Block devices:
  7 loop
234 nvidia-caps-imex-channels-not-a-char
`

func TestIMEXNoChannel(t *testing.T) {
	// What the H100/H200 machines show: the major is registered, the directory is missing.
	node := fakeNode(map[string]string{
		"/proc/devices":              procDevices,
		"/proc/driver/nvidia/params": "ResmanDebugLevel: 4294967295\nImexChannelCount: 2048\nCreateImexChannel0: 0\n",
	})
	s := readIMEX(node)
	assert.Equal(t, "host", s.Source)
	assert.Equal(t, 234, s.Major)
	require.NotNil(t, s.ChannelCount)
	assert.Equal(t, 2048, *s.ChannelCount)
	require.NotNil(t, s.CreateChannel0)
	assert.False(t, *s.CreateChannel0)
	assert.False(t, s.DirPresent)
	assert.False(t, s.Ready)
	assert.Contains(t, s.Diagnosis, "/dev/nvidia-caps-imex-channels does not exist")
	assert.Contains(t, s.Remedy, "mknod -m 666 /dev/nvidia-caps-imex-channels/channel0 c 234 0")
	assert.Contains(t, s.Remedy, "NVreg_CreateImexChannel0=1")

	// The same node, simulated: the diagnosis stays, no command is offered to run.
	node.simulated = true
	s = readIMEX(node)
	assert.Equal(t, "sim", s.Source)
	assert.Contains(t, s.Diagnosis, "/dev/nvidia-caps-imex-channels does not exist")
	assert.NotContains(t, s.Remedy, "mknod")
	assert.NotContains(t, s.Remedy, "sudo")
	assert.Contains(t, s.Remedy, "simulated node, nothing to run here")
	assert.Contains(t, s.Remedy, "create channel 0, or load the nvidia module with NVreg_CreateImexChannel0=1")
}

func TestIMEXSysfsParams(t *testing.T) {
	s := readIMEX(fakeNode(map[string]string{
		"/proc/devices": procDevices,
		"/sys/module/nvidia/parameters/NVreg_ImexChannelCount":   "0\n",
		"/sys/module/nvidia/parameters/NVreg_CreateImexChannel0": "1\n",
	}))
	require.NotNil(t, s.ChannelCount)
	assert.Equal(t, 0, *s.ChannelCount)
	require.NotNil(t, s.CreateChannel0)
	assert.True(t, *s.CreateChannel0)
	assert.Contains(t, s.Diagnosis, "NVreg_ImexChannelCount=0")
}

func TestIMEXNotRegistered(t *testing.T) {
	s := readIMEX(fakeNode(map[string]string{"/proc/devices": "Character devices:\n  1 mem\n"}))
	assert.Zero(t, s.Major)
	assert.Nil(t, s.ChannelCount)
	assert.Contains(t, s.Diagnosis, "does not list nvidia-caps-imex-channels")
	assert.Contains(t, s.Remedy, "/proc/devices", "the major number is looked up by the command")
}

func TestIMEXChannelFiles(t *testing.T) {
	// Regular files stand in for channel files: not character devices.
	s := readIMEX(fakeNode(map[string]string{
		"/proc/devices": procDevices,
		"/dev/nvidia-caps-imex-channels/channel10": "",
		"/dev/nvidia-caps-imex-channels/channel2":  "",
		"/dev/nvidia-caps-imex-channels/other":     "",
		"/dev/nvidia-caps-imex-channels/channelX":  "",
	}))
	assert.True(t, s.DirPresent)
	assert.Equal(t, 2, s.ChannelFiles, "channelX is not a channel")
	require.Len(t, s.Channels, 2)
	assert.Equal(t, "channel2", s.Channels[0].Name, "sorted by number")
	assert.Equal(t, "channel10", s.Channels[1].Name)
	assert.Equal(t, "not a character device", s.Channels[0].Problem)
	assert.False(t, s.Ready)
	assert.Contains(t, s.Diagnosis, "no usable IMEX channel: channel2: not a character device")

	empty := fakeNode(map[string]string{"/proc/devices": procDevices})
	empty.dir("/dev/nvidia-caps-imex-channels")
	s = readIMEX(empty)
	assert.True(t, s.DirPresent)
	assert.Contains(t, s.Diagnosis, "has no channel files")
}

func TestIMEXCharDevice(t *testing.T) {
	node := fakeNode(map[string]string{"/proc/devices": procDevices})
	node.add("/dev/nvidia-caps-imex-channels/channel0", charDev(1))
	s := readIMEX(node)
	require.Len(t, s.Channels, 1)
	assert.Contains(t, s.Channels[0].Problem, "major number 1, but nvidia-caps-imex-channels is 234")
	assert.False(t, s.Ready)

	denied := charDev(234)
	denied.denied = fs.ErrPermission
	node.add("/dev/nvidia-caps-imex-channels/channel0", denied)
	s = readIMEX(node)
	assert.Equal(t, "cannot open: permission denied", s.Channels[0].Problem)
	assert.Contains(t, s.Remedy, "give this user read-write access")

	node.add("/dev/nvidia-caps-imex-channels/channel0", charDev(234))
	s = readIMEX(node)
	assert.True(t, s.Ready, "%+v", s)
	assert.True(t, s.Channels[0].Accessible)
	assert.Empty(t, s.Remedy)
	assert.Contains(t, s.Diagnosis, "channel0 is present and accessible")
}

// TestIMEXHostile: what the node's files say is checked before it is believed.
func TestIMEXHostile(t *testing.T) {
	node := fakeNode(map[string]string{
		"/proc/devices":              "Character devices:\n99999999999999999999 nvidia-caps-imex-channels\n-3 nvidia-caps-imex-channels\n",
		"/proc/driver/nvidia/params": "ImexChannelCount: -7\nCreateImexChannel0: lots\n",
	})
	s := readIMEX(node)
	assert.Zero(t, s.Major, "no sane major number")
	assert.Nil(t, s.ChannelCount)
	assert.Nil(t, s.CreateChannel0)
	assert.Equal(t, 0, procDevicesMajor([]byte("Character devices:\n4096 nvidia-caps-imex-channels\n"), imexProcName), "majors are 12 bits")
}

func TestProcDevicesMajor(t *testing.T) {
	assert.Equal(t, 234, procDevicesMajor([]byte(procDevices), "nvidia-caps-imex-channels"))
	assert.Equal(t, 195, procDevicesMajor([]byte(procDevices), "nvidia"))
	assert.Equal(t, 0, procDevicesMajor([]byte(procDevices), "loop"), "block devices do not count")
	assert.Equal(t, 0, procDevicesMajor(nil, "nvidia"))
}

func TestIMEXOffLinux(t *testing.T) {
	node := fakeNode(map[string]string{"/proc/devices": procDevices})
	node.linux = false
	assert.Nil(t, readIMEX(node))
	var pe *fs.PathError
	_, err := node.ReadFile("/nope")
	assert.True(t, errors.As(err, &pe))
}
