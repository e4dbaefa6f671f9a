package pidfd

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// exporter is an export of two sim allocations (2 and 4 MiB) in this process, and what a
// forged manifest may name besides them.
type exporter struct {
	s     *sim.Sim
	m     *vmm.Manager
	a     []*vmm.Allocation
	e     *ipc.Exported
	pipe  [2]int
	files []manifestFile // the export's descriptors with their true files
}

func newExporter(t *testing.T) *exporter {
	t.Helper()
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	x := &exporter{s: s, m: vmm.New(s)}
	for _, size := range []uint64{2 << 20, 4 << 20} {
		a, err := x.m.Create(size, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR})
		require.NoError(t, err)
		x.a = append(x.a, a)
	}
	x.e, err = ipc.Export(x.m, x.a...)
	require.NoError(t, err)
	for _, fd := range x.e.FDs() {
		x.files = append(x.files, listed(t, fd))
	}
	require.NoError(t, unix.Pipe2(x.pipe[:], unix.O_CLOEXEC))
	return x
}

func (x *exporter) close(t *testing.T) {
	t.Helper()
	errs := []error{x.e.Close(), unix.Close(x.pipe[0]), unix.Close(x.pipe[1])}
	for _, a := range x.a {
		errs = append(errs, a.Close())
	}
	require.NoError(t, errors.Join(errs...))
	require.True(t, x.s.Stats().Clean(), "%+v", x.s.Stats())
}

func listed(t *testing.T, fd int) manifestFile {
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	return manifestFile{fd: fd, dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

// plant writes b into a memory file sealed with seals and maps it, as an exporter that lies
// in its manifest would, and returns a ticket of this process for it with testSecret. The
// caller closes tk.Manifest; the mapping goes at the test's end.
func plant(t *testing.T, b []byte, seals int) Ticket {
	t.Helper()
	tk := leave(t, b, seals)
	if len(b) > 0 {
		m, err := unix.Mmap(tk.Manifest, 0, len(b), unix.PROT_READ, unix.MAP_SHARED)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Munmap(m) })
	}
	return tk
}

// leave is plant without the mapping: a sealed memory file another process left in this
// one's descriptor table.
func leave(t *testing.T, b []byte, seals int) Ticket {
	t.Helper()
	fd, err := unix.MemfdCreate("cuvmm-ticket-manifest", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	require.NoError(t, err)
	_, err = unix.Pwrite(fd, b, 0)
	require.NoError(t, err)
	if seals != 0 {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
		require.NoError(t, err)
	}
	tk, err := self()
	require.NoError(t, err)
	tk.Manifest, tk.secret = fd, testSecret
	return tk
}

// What a manifest, the exporter's own word, can say that Fetch or ipc.Import refuses: whatever
// it lists, nothing fetched stays open and nothing imported stays held.
func TestFetchHostileManifest(t *testing.T) {
	x := newExporter(t)
	defer x.close(t)
	sizes := []uint64{2 << 20, 4 << 20}
	gran := uint64(2 << 20)
	pipe := listed(t, x.pipe[0])
	moved := x.files[1]
	moved.ino++
	for _, c := range []struct {
		name  string
		b     []byte
		seals int
		is    error
		says  string
	}{
		{"unsealed", rawManifest(testSecret, gran, sizes, x.files), 0, ipc.ErrProtocol, "(not a sealed memory file)"},
		{"sealed but writable", rawManifest(testSecret, gran, sizes, x.files), unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL, ipc.ErrProtocol, "(not a sealed memory file)"},
		{"too long", make([]byte, maxManifestLen+1), manifestSeals, ipc.ErrProtocol, "(its size)"},
		{"empty", nil, manifestSeals, ipc.ErrProtocol, "(its size)"},
		{"garbage", []byte("not a manifest at all, but sealed all the same............."), manifestSeals, ipc.ErrProtocol, "not a ticket's manifest"},
		{"a pipe listed", rawManifest(testSecret, gran, sizes, []manifestFile{x.files[0], pipe}), manifestSeals, ipc.ErrProtocol, "(allocation 1) is a pipe, not memory"},
		{"another file than listed", rawManifest(testSecret, gran, sizes, []manifestFile{x.files[0], moved}), manifestSeals, ipc.ErrProtocol, "(allocation 1) is not open on the file the manifest names"},
		{"a descriptor not open", rawManifest(testSecret, gran, sizes[:1], []manifestFile{{fd: 1000}}), manifestSeals, unix.EBADF, "descriptor 1000 (allocation 0) is not open"},
		{"a size larger than the allocation", rawManifest(testSecret, gran, []uint64{4 << 20, 4 << 20}, x.files), manifestSeals, cu.ERROR_NOT_SUPPORTED, "claimed size 4MiB"},
		{"a size past the device's memory", rawManifest(testSecret, gran, []uint64{64 << 40, 4 << 20}, x.files), manifestSeals, ipc.ErrProtocol, "claims 64TiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := plant(t, c.b, c.seals)
			defer unix.Close(tk.Manifest)
			before, held := countFDs(t), x.s.Stats()
			imp, err := FetchAndImport(tk, x.m, nil, AllowSelf())
			require.Nil(t, imp)
			require.ErrorIs(t, err, c.is)
			require.ErrorContains(t, err, c.says)
			requireOpenFDs(t, before, "every descriptor fetched is closed")
			after := x.s.Stats()
			require.Equal(t, [3]int{held.Handles, held.Reservations, held.Mappings}, [3]int{after.Handles, after.Reservations, after.Mappings})
			t.Log(err)
		})
	}
	// A true manifest that this process did not make (it does not map it), as a peer could
	// leave one, names the exporter's own descriptors in vain.
	tk := leave(t, rawManifest(testSecret, gran, sizes, x.files), manifestSeals)
	before := countFDs(t)
	_, err := FetchAndImport(tk, x.m, nil, AllowSelf())
	require.ErrorIs(t, err, ipc.ErrProtocol)
	require.ErrorContains(t, err, fmt.Sprintf("the manifest bears the ticket's secret but process %d did not make it", os.Getpid()))
	requireOpenFDs(t, before)
	unix.Close(tk.Manifest)
	// The same manifest, made here: the memory it lists comes.
	tk = plant(t, rawManifest(testSecret, gran, sizes, x.files), manifestSeals)
	defer unix.Close(tk.Manifest)
	imp, err := FetchAndImport(tk, x.m, nil, AllowSelf())
	require.NoError(t, err)
	require.Equal(t, uint64(6<<20), imp.Size())
	require.NoError(t, imp.Close())
}

// FuzzFetch fetches and imports what a manifest of this process lists: plan holds
// (descriptor, 2 MiB units, true file) triples, the descriptor among the export's, the
// pipe's and small numbers. Whatever it lists, FetchAndImport returns an error or memory of
// the listed size, and afterwards no descriptor is left open and sim holds what it held.
func FuzzFetch(f *testing.F) {
	f.Add([]byte{255, 1, 1, 254, 2, 1}) // the export, as it is
	f.Add([]byte{255, 1, 1})
	f.Add([]byte{253, 1, 1, 254, 2, 0})
	f.Add([]byte{3, 1, 1, 4, 2, 1, 5, 1, 0})
	f.Add([]byte{255, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, plan []byte) {
		if len(plan) > 3*16 {
			return
		}
		before := countFDs(t)
		x := newExporter(t)
		var sizes []uint64
		var files []manifestFile
		for i := 0; i+2 < len(plan); i += 3 {
			fd := int(plan[i] % 64)
			switch plan[i] {
			case 255, 254:
				fd = x.files[255-int(plan[i])].fd
			case 253:
				fd = x.pipe[0]
			}
			file := manifestFile{fd: fd, dev: uint64(plan[i+2]), ino: uint64(plan[i+1])}
			var st unix.Stat_t
			if plan[i+2]&1 != 0 && unix.Fstat(fd, &st) == nil {
				file = manifestFile{fd: fd, dev: uint64(st.Dev), ino: uint64(st.Ino)}
			}
			files = append(files, file)
			sizes = append(sizes, uint64(plan[i+1]%8)*2<<20)
		}
		tk := plant(t, rawManifest(testSecret, 2<<20, sizes, files), manifestSeals)
		imp, err := FetchAndImport(tk, x.m, nil, AllowSelf())
		if err != nil {
			require.Nil(t, imp)
			var ie *vmm.Error
			require.ErrorAs(t, err, &ie)
			require.Contains(t, []string{"pidfd", "ipc"}, ie.Pkg, "the fetch's error, or the import's")
		} else {
			var total uint64
			for _, s := range sizes {
				total += s
			}
			require.Equal(t, total, imp.Size())
			require.NoError(t, imp.Close())
		}
		x.close(t)
		unix.Close(tk.Manifest)
		requireOpenFDs(t, before, "descriptors left open")
	})
}
