package sim_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const envShareChild = "CUVMM_SIM_SHARE_CHILD"

// runShareChildIfRequested is the child of TestShareFDAcrossProcesses: it receives a
// descriptor over the Unix socket on fd 3, imports it into its own Sim, checks the parent's
// bytes and overwrites them for the parent to check.
func runShareChildIfRequested() {
	if os.Getenv(envShareChild) == "" {
		return
	}
	if err := shareChild(); err != nil {
		fmt.Fprintln(os.Stderr, "share child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func shareChild() error {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(3, buf, oob, 0)
	if err != nil {
		return err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("rights: %v", err)
	}
	s, err := sim.New(sim.PresetH100())
	if err != nil {
		return err
	}
	h, err := s.ImportFD(fds[0])
	unix.Close(fds[0])
	if err != nil {
		return err
	}
	va, err := s.Reserve(2<<20, 0, 0, 0)
	if err != nil {
		return err
	}
	if err := s.Map(va, 2<<20, 0, h, 0); err != nil {
		return err
	}
	if err := s.SetAccess(va, 2<<20, []cu.MemAccessDesc{{Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}, Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}); err != nil {
		return err
	}
	got := make([]byte, 2<<20)
	if err := s.CopyDtoH(0, got, va); err != nil {
		return err
	}
	if !bytes.Equal(got, pattern(buf[0], 2<<20)) {
		return fmt.Errorf("child read other bytes than the parent wrote")
	}
	if err := s.CopyHtoD(0, va, pattern(buf[0]+1, 2<<20)); err != nil {
		return err
	}
	if err := s.Unmap(va, 2<<20); err != nil {
		return err
	}
	if err := s.Free(va, 2<<20); err != nil {
		return err
	}
	if err := s.Release(h); err != nil {
		return err
	}
	if !s.Stats().Clean() {
		return fmt.Errorf("child leaked: %+v", s.Stats())
	}
	return nil
}

func TestShareFDAcrossProcesses(t *testing.T) {
	s, va, h := mapped(t, sim.PresetH100(), cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
	const seed = 7
	require.NoError(t, s.CopyHtoD(0, va, pattern(seed, 2<<20)))
	fd, err := s.ExportFD(h)
	require.NoError(t, err)
	defer unix.Close(fd)

	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	parent, childEnd := os.NewFile(uintptr(pair[0]), "parent"), os.NewFile(uintptr(pair[1]), "child")
	defer parent.Close()
	cmd := reexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envShareChild+"=1")
	cmd.ExtraFiles = []*os.File{childEnd}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	childEnd.Close()
	require.NoError(t, unix.Sendmsg(pair[0], []byte{seed}, unix.UnixRights(fd), nil, 0))
	require.NoError(t, cmd.Wait(), "child: %s", out.String())

	got := make([]byte, 2<<20)
	require.NoError(t, s.CopyDtoH(0, got, va))
	require.Equal(t, pattern(seed+1, 2<<20), got, "the parent sees the child's writes")
}

func TestFabricAcrossSims(t *testing.T) {
	// Two Sims of one process stand in for two processes: the importer reaches the memory
	// through /proc/<pid>/fd, as another process would.
	a, va, h := mapped(t, sim.PresetMNNVL(), cu.MEM_HANDLE_TYPE_FABRIC)
	require.NoError(t, a.CopyHtoD(0, va, pattern(3, 4096)))
	tok, err := a.ExportFabric(h)
	require.NoError(t, err)
	b, err := sim.New(sim.PresetMNNVL())
	require.NoError(t, err)
	h2, err := b.ImportFabric(tok)
	require.NoError(t, err)
	vb := mapHandle(t, b, h2, 2<<20)
	got := make([]byte, 4096)
	require.NoError(t, b.CopyDtoH(0, got, vb))
	require.Equal(t, pattern(3, 4096), got)
}

const envFabricChild = "CUVMM_SIM_FABRIC_CHILD"

// runFabricChildIfRequested is the child of TestFabricAcrossProcesses: it imports the
// parent's token (hex in the environment) into its own Sim and reads the parent's bytes.
func runFabricChildIfRequested() {
	tok := os.Getenv(envFabricChild)
	if tok == "" {
		return
	}
	if err := fabricChild(tok); err != nil {
		fmt.Fprintln(os.Stderr, "fabric child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func fabricChild(hexTok string) error {
	b, err := hex.DecodeString(hexTok)
	if err != nil || len(b) != 64 {
		return fmt.Errorf("token %q", hexTok)
	}
	s, err := sim.New(sim.PresetMNNVL())
	if err != nil {
		return err
	}
	h, err := s.ImportFabric(cu.MemFabricHandle(b))
	if err != nil {
		return err
	}
	va, err := s.Reserve(2<<20, 0, 0, 0)
	if err != nil {
		return err
	}
	if err := s.Map(va, 2<<20, 0, h, 0); err != nil {
		return err
	}
	if err := s.SetAccess(va, 2<<20, []cu.MemAccessDesc{{Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}, Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}); err != nil {
		return err
	}
	got := make([]byte, 4096)
	if err := s.CopyDtoH(0, got, va); err != nil {
		return err
	}
	if !bytes.Equal(got, pattern(5, 4096)) {
		return fmt.Errorf("child read other bytes than the parent wrote")
	}
	if err := s.Unmap(va, 2<<20); err != nil {
		return err
	}
	if err := s.Free(va, 2<<20); err != nil {
		return err
	}
	return s.Release(h)
}

func TestFabricAcrossProcesses(t *testing.T) {
	s, va, h := mapped(t, sim.PresetMNNVL(), cu.MEM_HANDLE_TYPE_FABRIC)
	require.NoError(t, s.CopyHtoD(0, va, pattern(5, 4096)))
	tok, err := s.ExportFabric(h)
	require.NoError(t, err)
	cmd := reexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envFabricChild+"="+hex.EncodeToString(tok[:]))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)
}

// TestForgedFabricTokens sends sim tokens an attacker can make: naming a file the victim
// has open read-only, a memfd of the victim's with the wrong secret, or a random secret. None
// may import, and the victim's file must be untouched.
func TestForgedFabricTokens(t *testing.T) {
	victim, err := os.CreateTemp(t.TempDir(), "secret")
	require.NoError(t, err)
	_, err = victim.WriteString("do not touch")
	require.NoError(t, err)
	require.NoError(t, victim.Close())
	ro, err := os.Open(victim.Name())
	require.NoError(t, err)
	defer ro.Close()

	s, _, h := mapped(t, sim.PresetMNNVL(), cu.MEM_HANDLE_TYPE_FABRIC)
	real, err := s.ExportFabric(h)
	require.NoError(t, err)
	b, err := sim.New(sim.PresetMNNVL())
	require.NoError(t, err)

	forge := func(base cu.MemFabricHandle, pid, fd uint32, secretByte byte) cu.MemFabricHandle {
		tok := base
		if secretByte != 0 {
			for i := 16; i < 48; i++ {
				tok[i] = secretByte
			}
		}
		binary.LittleEndian.PutUint32(tok[48:], pid)
		binary.LittleEndian.PutUint32(tok[52:], fd)
		return tok
	}
	pid := uint32(os.Getpid())
	realFD := binary.LittleEndian.Uint32(real[52:])
	for name, tok := range map[string]cu.MemFabricHandle{
		"read-only file of the victim":     forge(real, pid, uint32(ro.Fd()), 0),
		"real memfd, wrong secret":         forge(real, pid, realFD, 0x5a),
		"random secret":                    forge(real, pid, 3, 0x11),
		"another process's descriptor":     forge(real, 1, 0, 0),
		"read-only file, wrong secret too": forge(real, pid, uint32(ro.Fd()), 0x77),
		"not a sim token":                  {1, 2, 3},
		// Found by FuzzFabricToken: the device was taken from the token, not checked
		// against the file, so the real memory imported as another device's.
		"real token, another device":         func() cu.MemFabricHandle { x := real; x[56] = 1; return x }(),
		"real memfd, secret of the real one": forge(real, pid, uint32(ro.Fd()), 0), // the secret alone leads nowhere else
	} {
		_, err := b.ImportFabric(tok)
		require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED, name)
	}
	// The driver ignores a handle's last byte (vmmtest fabric/import-one-byte-changed).
	last := real
	last[63] ^= 0xff
	h, err = b.ImportFabric(last)
	require.NoError(t, err, "the real token with its last byte changed")
	require.NoError(t, b.Release(h))
	got, err := os.ReadFile(victim.Name())
	require.NoError(t, err)
	require.Equal(t, "do not touch", string(got))
	fi, err := os.Stat(victim.Name())
	require.NoError(t, err)
	require.EqualValues(t, len("do not touch"), fi.Size(), "the file was not grown or truncated")
	require.True(t, b.Stats().Clean(), "%+v", b.Stats())
}

// forgedExport is a descriptor of a memfd named as sim names its arena of exports, holding
// hdr at offset at and positioned there, as an export of another process would be.
func forgedExport(t *testing.T, name string, at int64, hdr []byte) int {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	require.NoError(t, err)
	require.NoError(t, unix.Ftruncate(fd, at+64<<10+4<<20))
	_, err = unix.Pwrite(fd, hdr, at)
	require.NoError(t, err)
	_, err = unix.Seek(fd, at, io.SeekStart)
	require.NoError(t, err)
	return fd
}

// arenaHeader is the header sim writes before an allocation in its arena.
func arenaHeader(dev, size, base uint64) []byte {
	b := []byte("cuvmm-sim-alloc\x00")
	b = binary.LittleEndian.AppendUint64(b, dev)
	b = binary.LittleEndian.AppendUint64(b, size)
	return binary.LittleEndian.AppendUint64(b, base)
}

// TestForgedDescriptors imports memfds made to look like sim's exports but describing what
// no device here has (an unknown device, a size that is not whole granules, a size larger
// than the device) or not quite sim's (a header elsewhere than the offset, another name).
// They are refused as the driver refuses descriptors that are not allocations.
func TestForgedDescriptors(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	const arena, at = "cuvmm-sim.exports", 64 << 10
	for _, c := range []struct {
		name string
		at   int64
		hdr  []byte
	}{
		{arena, at, arenaHeader(7, 2<<20, at)},          // no device 7
		{arena, at, arenaHeader(0, 3<<19, at)},          // 1.5 MiB: not whole granules
		{arena, at, arenaHeader(0, 1<<50, at)},          // larger than the device
		{arena, at, arenaHeader(0, 0, at)},              // empty
		{arena, at, arenaHeader(0, 2<<20, 2*at)},        // a header of another offset
		{arena, 0, arenaHeader(0, 2<<20, 0)},            // at the start, where sim never puts one
		{arena, at, arenaHeader(1<<40, 2<<20, at)},      // a device past any
		{arena, at, []byte("cuvmm-sim-alloc!")},         // not the magic
		{"cuvmm-sim.d0", at, arenaHeader(0, 2<<20, at)}, // not the arena
		{"cuvmm-sim.f0.xyz", 0, nil},                    // a fabric name without a secret
	} {
		fd := forgedExport(t, c.name, c.at, c.hdr)
		_, err = s.ImportFD(fd)
		unix.Close(fd)
		require.ErrorIs(t, err, cu.ERROR_UNKNOWN, "%s at %d: %q", c.name, c.at, c.hdr)
	}
	// Well formed, it is taken: sim cannot tell it from another process's allocation.
	fd := forgedExport(t, arena, at, arenaHeader(0, 2<<20, at))
	defer unix.Close(fd)
	h, err := s.ImportFD(fd)
	require.NoError(t, err)
	require.NoError(t, s.Release(h))
	require.True(t, s.Stats().Clean())
}

// As the driver does, sim opens every POSIX descriptor it exports on one file (fstat of any
// two shows the same device and inode) while the process holds exportable memory, and tells
// them apart by the open file: two exports of two allocations import as those two, in
// another Sim too, and an export holds its allocation after the exporter released it.
func TestExportsShareOneFile(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	other, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	p := cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}, RequestedHandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}
	keeper, err := s.Create(2<<20, &p, 0)
	require.NoError(t, err)
	var fds []int
	var files []unix.Stat_t
	for i := range 2 {
		h, err := s.Create(2<<20, &p, 0)
		require.NoError(t, err)
		va, err := s.Reserve(2<<20, 0, 0, 0)
		require.NoError(t, err)
		require.NoError(t, s.Map(va, 2<<20, 0, h, 0))
		require.NoError(t, s.SetAccess(va, 2<<20, []cu.MemAccessDesc{{Location: p.Location, Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}))
		require.NoError(t, s.MemsetD8(0, va, byte(0xa0+i), 2<<20))
		fd, err := s.ExportFD(h)
		require.NoError(t, err)
		fds = append(fds, fd)
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(fd, &st))
		files = append(files, st)
		// The exporter lets go of everything; the export holds the memory.
		require.NoError(t, s.Unmap(va, 2<<20))
		require.NoError(t, s.Free(va, 2<<20))
		require.NoError(t, s.Release(h))
	}
	require.Equal(t, [2]uint64{uint64(files[0].Dev), uint64(files[0].Ino)}, [2]uint64{uint64(files[1].Dev), uint64(files[1].Ino)}, "one file")
	for i, fd := range fds {
		h, err := other.ImportFD(fd)
		require.NoError(t, err)
		va, err := other.Reserve(2<<20, 0, 0, 0)
		require.NoError(t, err)
		require.NoError(t, other.Map(va, 2<<20, 0, h, 0))
		require.NoError(t, other.SetAccess(va, 2<<20, []cu.MemAccessDesc{{Location: p.Location, Flags: cu.MEM_ACCESS_FLAGS_PROT_READWRITE}}))
		got := make([]byte, 4)
		require.NoError(t, other.CopyDtoH(0, got, va+1<<20))
		require.Equal(t, bytes.Repeat([]byte{byte(0xa0 + i)}, 4), got, "export %d holds its own allocation", i)
		require.NoError(t, other.Unmap(va, 2<<20))
		require.NoError(t, other.Free(va, 2<<20))
		require.NoError(t, other.Release(h))
		require.NoError(t, unix.Close(fd))
	}
	require.NoError(t, s.Release(keeper))
	require.True(t, s.Stats().Clean(), "%+v", s.Stats())
	require.True(t, other.Stats().Clean(), "%+v", other.Stats())
}

// A fabric allocation's memfd is named after its secret's digest, not the secret: a
// process that reads the exporter's descriptor links (here this one's) cannot make a
// token from the name, even for memory never exported.
func TestFabricNameMakesNoToken(t *testing.T) {
	victim, err := sim.New(sim.PresetMNNVL())
	require.NoError(t, err)
	h, err := victim.Create(2<<20, devProp(0, cu.MEM_HANDLE_TYPE_FABRIC), 0)
	require.NoError(t, err)
	defer victim.Release(h)
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	forged := 0
	for _, e := range ents {
		link, _ := os.Readlink("/proc/self/fd/" + e.Name())
		name, ok := strings.CutPrefix(strings.TrimSuffix(link, " (deleted)"), "/memfd:cuvmm-sim.f")
		if !ok {
			continue
		}
		dev, inName, _ := strings.Cut(name, ".")
		b, err := hex.DecodeString(inName)
		require.NoError(t, err)
		var tok cu.MemFabricHandle
		copy(tok[:16], "cuvmm-sim-fabric")
		copy(tok[16:48], b)
		fd, _ := strconv.Atoi(e.Name())
		d, _ := strconv.Atoi(dev)
		binary.LittleEndian.PutUint32(tok[48:], uint32(os.Getpid()))
		binary.LittleEndian.PutUint32(tok[52:], uint32(fd))
		binary.LittleEndian.PutUint32(tok[56:], uint32(d))
		importer, err := sim.New(sim.PresetMNNVL())
		require.NoError(t, err)
		_, err = importer.ImportFabric(tok)
		require.Error(t, err, "a token made from the name %s imported", link)
		forged++
	}
	require.NotZero(t, forged, "no fabric memfd among this process's descriptors")
}
