package sim_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
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
		"trailing bytes that must be zero": func() cu.MemFabricHandle { x := real; x[63] = 1; return x }(),
		"not a sim token":                  {1, 2, 3},
		// Found by FuzzFabricToken: the device was taken from the token, not checked
		// against the file, so the real memory imported as another device's.
		"real token, another device":         func() cu.MemFabricHandle { x := real; x[56] = 1; return x }(),
		"real memfd, secret of the real one": forge(real, pid, uint32(ro.Fd()), 0), // the secret alone leads nowhere else
	} {
		_, err := b.ImportFabric(tok)
		require.ErrorIs(t, err, cu.ERROR_INVALID_VALUE, name)
	}
	got, err := os.ReadFile(victim.Name())
	require.NoError(t, err)
	require.Equal(t, "do not touch", string(got))
	fi, err := os.Stat(victim.Name())
	require.NoError(t, err)
	require.EqualValues(t, len("do not touch"), fi.Size(), "the file was not grown or truncated")
	require.True(t, b.Stats().Clean(), "%+v", b.Stats())
}

// TestForgedDescriptors imports memfds named as sim names them but describing what no
// device here has: an unknown device, a size that is not whole granules, a size larger
// than the device. They are refused as the driver refuses descriptors that are not
// allocations.
func TestForgedDescriptors(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		size int64
	}{
		{"cuvmm-sim.d7", 2 << 20},     // no device 7
		{"cuvmm-sim.d00", 2 << 20},    // not a name sim makes
		{"cuvmm-sim.d0x", 2 << 20},    // nor this
		{"cuvmm-sim.d0", 3 << 19},     // 1.5 MiB: not whole granules
		{"cuvmm-sim.d0", 1 << 50},     // larger than the device
		{"cuvmm-sim.d0", 0},           // empty
		{"cuvmm-sim.f0.xyz", 2 << 20}, // a fabric name without a secret
	} {
		fd, err := unix.MemfdCreate(c.name, unix.MFD_CLOEXEC)
		require.NoError(t, err)
		require.NoError(t, unix.Ftruncate(fd, c.size))
		_, err = s.ImportFD(fd)
		unix.Close(fd)
		require.ErrorIs(t, err, cu.ERROR_UNKNOWN, "%s of %d bytes", c.name, c.size)
	}
	// Well formed, it is taken: sim cannot tell it from another process's allocation.
	fd, err := unix.MemfdCreate("cuvmm-sim.d0", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Ftruncate(fd, 2<<20))
	h, err := s.ImportFD(fd)
	require.NoError(t, err)
	require.NoError(t, s.Release(h))
	require.True(t, s.Stats().Clean())
}
