package sim_test

import (
	"bytes"
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
