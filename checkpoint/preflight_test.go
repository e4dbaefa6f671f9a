package checkpoint_test

import (
	"bytes"
	"io/fs"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/stretchr/testify/assert"
)

func link(target string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
}

// node is a /proc with a CUDA process 100 (two GPUs, a dma-buf), a stopped one 200, a
// process without CUDA 300, one with a thread stopped by a tracer 400.
func node() fstest.MapFS {
	return fstest.MapFS{
		"proc/100/stat":   {Data: []byte("100 (python3 (worker)) S 1 100 ...")},
		"proc/100/status": {Data: []byte("Name:\tpython3\nVmPeak:\t 9999 kB\nVmRSS:\t 9242880 kB\nRssAnon:\t 5242000 kB\nRssFile:\t 4000000 kB\nRssShmem:\t 880 kB\nThreads:\t9\n")},
		"proc/100/maps":   {Data: []byte("7f00-7f10 r-xp 0 08:01 42 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n")},
		"proc/100/fd/0":   link("/dev/null"),
		"proc/100/fd/3":   link("/dev/nvidiactl"),
		"proc/100/fd/4":   link("/dev/nvidia0"),
		"proc/100/fd/5":   link("/dev/nvidia3"),
		"proc/100/fd/6":   link("/dev/nvidiactl"),
		"proc/100/fd/7":   link("anon_inode:dmabuf"),
		"proc/100/fd/8":   link("/dev/nvidia-uvm"),
		"proc/200/stat":   {Data: []byte("200 (trainer) T 1 200 ...")},
		"proc/200/maps":   {Data: []byte("x /usr/lib64/libcuda.so.1\n")},
		"proc/200/fd/3":   link("/dev/nvidia1"),
		"proc/300/stat":   {Data: []byte("300 (bash) S 1 300 ...")},
		// 400: running, but its second thread stopped by a tracer.
		"proc/400/stat":          {Data: []byte("400 (server) S 1 400 ...")},
		"proc/400/maps":          {Data: []byte("x /usr/lib/x86_64-linux-gnu/libcuda.so.1\n")},
		"proc/400/task/400/stat": {Data: []byte("400 (server) S 1 400 ...")},
		"proc/400/task/401/stat": {Data: []byte("401 (worker) t 1 400 ...")},
		// 600: its main thread exited, a worker runs.
		"proc/600/stat":          {Data: []byte("600 (server) Z 1 600 ...")},
		"proc/600/task/600/stat": {Data: []byte("600 (server) Z 1 600 ...")},
		"proc/600/task/601/stat": {Data: []byte("601 (worker) S 1 600 ...")},
		// 700: exited.
		"proc/700/stat": {Data: []byte("700 (gone) Z 1 700 ...")},
		"proc/300/maps": {Data: []byte("x /usr/lib/libc.so.6\n")},
		"proc/300/fd/0": link("/dev/pts/0"),
		// The driver's own view of the GPUs: minor 0 and 3 (minor 2's file has no UUID).
		"proc/driver/nvidia/gpus/0000:18:00.0/information": {Data: []byte("Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632\nBus Location: \t 0000:18:00.0\nDevice Minor: \t 0\n")},
		"proc/driver/nvidia/gpus/0000:9a:00.0/information": {Data: []byte("Model: \t\t NVIDIA H200\nDevice Minor: \t 3\nGPU UUID: \t GPU-a1b2c3d4-0000-1111-2222-333344445555\n")},
		"proc/driver/nvidia/gpus/0000:ab:00.0/information": {Data: []byte("Model: \t\t NVIDIA H200\nDevice Minor: \t 2\n")},
	}
}

func TestPreflight(t *testing.T) {
	r := checkpoint.Preflight(node(), 100)
	assert.Equal(t, "python3 (worker)", r.Comm)
	assert.Equal(t, "S", r.State)
	assert.True(t, r.CUDA)
	assert.Equal(t, []int{0, 3}, r.GPUs)
	assert.Equal(t, []string{"GPU-21e98147-3d5f-85a4-e889-2c15ae7b7632", "GPU-a1b2c3d4-0000-1111-2222-333344445555"}, r.GPUUUIDs)
	assert.Equal(t, 2, r.Control)
	assert.Equal(t, 1, r.DmaBufs)
	assert.EqualValues(t, 5<<30, r.Resident, "anonymous and shared, not the file pages")
	if assert.Len(t, r.Warnings, 1) {
		assert.Contains(t, r.Warnings[0].What, "2 /dev/nvidiactl descriptors where a CUDA process that shares no memory holds 1")
	}
	if assert.Len(t, r.Hazards, 1) {
		assert.Contains(t, r.Hazards[0].What, "1 dma-buf descriptor(s) open")
	}

	r = checkpoint.Preflight(node(), 200)
	assert.Equal(t, []string{""}, r.GPUUUIDs, "minor 1 has no information file")
	if assert.Len(t, r.Hazards, 1) {
		assert.Contains(t, r.Hazards[0].What, "stopped")
		assert.Contains(t, r.Hazards[0].Remedy, "kill -CONT 200")
	}

	r = checkpoint.Preflight(node(), 300)
	assert.False(t, r.CUDA)
	if assert.Len(t, r.Hazards, 1) {
		assert.Contains(t, r.Hazards[0].What, "no CUDA process")
	}

	r = checkpoint.Preflight(node(), 400)
	if assert.NotEmpty(t, r.Hazards) {
		assert.Contains(t, r.Hazards[0].What, "stopped", "a thread stopped by a tracer")
	}

	r = checkpoint.Preflight(node(), 600)
	if assert.NotEmpty(t, r.Hazards) {
		assert.Contains(t, r.Hazards[0].What, "its main thread has exited while other threads run")
	}
	r = checkpoint.Preflight(node(), 700)
	if assert.NotEmpty(t, r.Hazards) {
		assert.Equal(t, "the process has exited", r.Hazards[0].What)
	}

	r = checkpoint.Preflight(node(), 500)
	if assert.Len(t, r.Hazards, 1) {
		assert.Contains(t, r.Hazards[0].What, "no process 500")
	}
}

// FuzzPreflight: what another process controls of its /proc files (its name, in stat and
// in its descriptors' links) never makes the preflight panic, and a report always names the
// process.
func FuzzPreflight(f *testing.F) {
	f.Add([]byte("100 (python3 (worker)) S 1 100"), "anon_inode:dmabuf", []byte("x /libcuda.so"))
	f.Add([]byte("100 ()) T"), "/dev/nvidia99999999999999999999", []byte(""))
	f.Add([]byte(")("), "/dev/nvidia-1", []byte("\x00"))
	f.Add([]byte("frozen 1"), "0::/a", []byte("libcuda.so /libcuda.s"))
	f.Fuzz(func(t *testing.T, stat []byte, target string, maps []byte) {
		fsys := fstest.MapFS{
			"proc/1/stat":                           {Data: stat},
			"proc/1/maps":                           {Data: maps},
			"proc/1/fd/3":                           link(target),
			"proc/driver/nvidia/gpus/x/information": {Data: append([]byte("Device Minor: "), stat...)},
			"proc/1/task/1/stat":                    {Data: stat},
			"proc/1/task/2/stat":                    {Data: maps},
			"proc/1/task/2/cgroup":                  {Data: []byte(target)},
			"sys/fs/cgroup/a/cgroup.events":         {Data: stat},
		}
		r := checkpoint.Preflight(fsys, 1)
		if r.Pid != 1 || r.Hazards == nil || r.Warnings == nil || r.GPUs == nil || len(r.GPUUUIDs) != len(r.GPUs) {
			t.Fatalf("%+v", r)
		}
		if r.CUDA != bytes.Contains(maps, []byte("/libcuda.so")) {
			t.Fatalf("CUDA %v for maps %q", r.CUDA, maps)
		}
	})
}

// The maps file is the inspected process's to make long (vm.max_map_count lines, each of a
// path that may be longer than any buffer): Preflight reads a block at a time, finds libcuda
// after 48 MiB of others and at the end of a 70 KiB path, and stops at 64 MiB.
func TestPreflightLongMaps(t *testing.T) {
	line := "7f00-7f10 r--s 0 08:01 42 /" + strings.Repeat("d", 4000) + "\n"
	for _, tc := range []struct {
		maps string
		cuda bool
	}{
		{strings.Repeat(line, 48<<20/len(line)) + "x /usr/lib64/libcuda.so.1\n", true},
		{"x /" + strings.Repeat("d/", 35<<10) + "libcuda.so.1\n", true},
		{strings.Repeat("d", 64<<10-5) + "/libcuda.so.1\n", true}, // across two blocks
		{strings.Repeat(line, 65<<20/len(line)) + "x /usr/lib64/libcuda.so.1\n", false},
	} {
		fsys := node()
		fsys["proc/100/maps"] = &fstest.MapFile{Data: []byte(tc.maps)}
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		r := checkpoint.Preflight(fsys, 100)
		runtime.ReadMemStats(&b)
		assert.Equal(t, tc.cuda, r.CUDA, "%d bytes", len(tc.maps))
		assert.Less(t, b.TotalAlloc-a.TotalAlloc, uint64(8<<20), "allocated reading the maps")
	}
}
