package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRoot lays out files under a temporary root: path -> content.
func fakeRoot(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	return root
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
	root := fakeRoot(t, map[string]string{
		"proc/devices":              procDevices,
		"proc/driver/nvidia/params": "ResmanDebugLevel: 4294967295\nImexChannelCount: 2048\nCreateImexChannel0: 0\n",
	})
	s := readIMEX(root)
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
}

func TestIMEXSysfsParams(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/devices": procDevices,
		"sys/module/nvidia/parameters/NVreg_ImexChannelCount":   "0\n",
		"sys/module/nvidia/parameters/NVreg_CreateImexChannel0": "1\n",
	})
	s := readIMEX(root)
	require.NotNil(t, s.ChannelCount)
	assert.Equal(t, 0, *s.ChannelCount)
	require.NotNil(t, s.CreateChannel0)
	assert.True(t, *s.CreateChannel0)
	assert.Contains(t, s.Diagnosis, "NVreg_ImexChannelCount=0")
}

func TestIMEXNotRegistered(t *testing.T) {
	root := fakeRoot(t, map[string]string{"proc/devices": "Character devices:\n  1 mem\n"})
	s := readIMEX(root)
	assert.Zero(t, s.Major)
	assert.Nil(t, s.ChannelCount)
	assert.Contains(t, s.Diagnosis, "does not list nvidia-caps-imex-channels")
	assert.Contains(t, s.Remedy, "/proc/devices", "the major number is looked up by the command")
}

func TestIMEXChannelFiles(t *testing.T) {
	// Regular files stand in for channel files: not character devices.
	root := fakeRoot(t, map[string]string{
		"proc/devices": procDevices,
		"dev/nvidia-caps-imex-channels/channel10": "",
		"dev/nvidia-caps-imex-channels/channel2":  "",
		"dev/nvidia-caps-imex-channels/other":     "",
	})
	s := readIMEX(root)
	assert.True(t, s.DirPresent)
	assert.Equal(t, 2, s.ChannelFiles)
	require.Len(t, s.Channels, 2)
	assert.Equal(t, "channel2", s.Channels[0].Name, "sorted by number")
	assert.Equal(t, "channel10", s.Channels[1].Name)
	assert.Equal(t, "not a character device", s.Channels[0].Problem)
	assert.False(t, s.Ready)
	assert.Contains(t, s.Diagnosis, "no usable IMEX channel: channel2: not a character device")

	empty := fakeRoot(t, map[string]string{"proc/devices": procDevices})
	require.NoError(t, os.MkdirAll(filepath.Join(empty, "dev/nvidia-caps-imex-channels"), 0o755))
	s = readIMEX(empty)
	assert.True(t, s.DirPresent)
	assert.Contains(t, s.Diagnosis, "has no channel files")
}

func TestIMEXCharDevice(t *testing.T) {
	// /dev/null is a character device everyone can open: a channel file of the wrong
	// major number, then (pretending its major is registered) a usable one.
	root := fakeRoot(t, map[string]string{"proc/devices": procDevices})
	dir := filepath.Join(root, "dev/nvidia-caps-imex-channels")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if err := os.Symlink("/dev/null", filepath.Join(dir, "channel0")); err != nil {
		t.Skip(err)
	}
	s := readIMEX(root)
	require.Len(t, s.Channels, 1)
	assert.Contains(t, s.Channels[0].Problem, "major number 1, but nvidia-caps-imex-channels is 234")
	assert.False(t, s.Ready)

	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/devices"), []byte("Character devices:\n  1 nvidia-caps-imex-channels\n"), 0o644))
	s = readIMEX(root)
	assert.True(t, s.Ready, "%+v", s)
	assert.True(t, s.Channels[0].Accessible)
	assert.Empty(t, s.Remedy)
	assert.Contains(t, s.Diagnosis, "channel0 is present and accessible")
}

func TestProcDevicesMajor(t *testing.T) {
	assert.Equal(t, 234, procDevicesMajor([]byte(procDevices), "nvidia-caps-imex-channels"))
	assert.Equal(t, 195, procDevicesMajor([]byte(procDevices), "nvidia"))
	assert.Equal(t, 0, procDevicesMajor([]byte(procDevices), "loop"), "block devices do not count")
	assert.Equal(t, 0, procDevicesMajor(nil, "nvidia"))
}
