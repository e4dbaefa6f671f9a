package pidfd_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc/pidfd"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The exporter decides how long its /proc/PID/maps is (vm.max_map_count lines of a path
// each): a Fetch reads it a line at a time, whatever its length (here 8,000 mappings of a
// path of 3,800 bytes, 30 MiB).
func TestFetchLongMaps(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	m := vmm.New(s)
	b := shareable(t, m)
	defer b.Close()
	e := exportBuffer(t, m, b)
	defer e.Close()
	tk, err := pidfd.Publish(e)
	require.NoError(t, err)

	dir := t.TempDir()
	for len(dir) < 3800 {
		dir = filepath.Join(dir, strings.Repeat("d", 200))
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	f, err := os.Create(filepath.Join(dir, "f"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(4096))
	for range 8000 { // offset 0 each: neighbours never merge into one line
		mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
		require.NoError(t, err)
		defer unix.Munmap(mem)
	}

	var a, z runtime.MemStats
	runtime.ReadMemStats(&a)
	r, err := pidfd.Fetch(tk, pidfd.AllowSelf())
	runtime.ReadMemStats(&z)
	require.NoError(t, err)
	r.Close()
	require.Less(t, z.TotalAlloc-a.TotalAlloc, uint64(8<<20), "allocated by a Fetch")
}
