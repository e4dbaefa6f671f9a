//go:build gpu

package checkpoint_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/checkpoint"
	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/reexec"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const envChild = "CUVMM_CHECKPOINT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		if err := child(os.Getenv(envChild)); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const chunk = 64 << 20

// child holds GiB gibibytes of VMM memory in one reservation of 64 MiB chunks, chunk i
// filled with byte i+1; it says "ready", waits for a line, then checks every byte and says
// "ok" or what differs.
func child(gibs string) error {
	n, err := strconv.Atoi(gibs)
	if err != nil {
		return err
	}
	b, err := vmm.CUDA()
	if err != nil {
		return err
	}
	m := vmm.New(b)
	size := uint64(n) << 30
	r, err := m.Reserve(size)
	if err != nil {
		return err
	}
	for off := uint64(0); off < size; off += chunk {
		a, err := m.Create(chunk, vmm.DeviceProps(0))
		if err != nil {
			return err
		}
		mp, err := r.Map(off, a)
		if err != nil {
			return err
		}
		if err := mp.SetAccess(vmm.ReadWrite(0)...); err != nil {
			return err
		}
		if err := m.Fill(0, r.Base()+cu.DevicePtr(off), byte(off/chunk+1), chunk); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	buf := make([]byte, chunk)
	for off := uint64(0); off < size; off += chunk {
		if err := m.ReadAt(0, buf, r.Base()+cu.DevicePtr(off)); err != nil {
			return err
		}
		if want := byte(off/chunk + 1); bytes.Count(buf, []byte{want}) != chunk {
			fmt.Printf("chunk at +%d: not all %#x\n", off, want)
			return nil
		}
	}
	fmt.Println("ok")
	return nil
}

// TestGPUCheckpointRestore: a child holding CUVMM_CHECKPOINT_GIB GiB (16 by default) of VMM
// memory is locked, checkpointed (its device memory given back), restored and unlocked, and
// reads every byte back. Each call's time is logged, and what the driver answers to calls
// in states that do not allow them.
func TestGPUCheckpointRestore(t *testing.T) {
	if _, err := vmm.CUDA(); errors.Is(err, loader.ErrNoDriver) {
		t.Skip("no CUDA driver")
	}
	gibs := "16"
	if v := os.Getenv("CUVMM_CHECKPOINT_GIB"); v != "" {
		gibs = v
	}
	cmd := reexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+gibs)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	pid := cmd.Process.Pid

	b, err := vmm.CUDA()
	require.NoError(t, err)
	m := vmm.New(b)
	free0, _, err := m.MemInfo(0)
	require.NoError(t, err)
	p, err := checkpoint.New(checkpoint.CUDA{}, pid)
	require.NoError(t, err)
	timed := func(what string, f func() error) {
		t0 := time.Now()
		require.NoError(t, f(), what)
		t.Logf("%s: %v", what, time.Since(t0))
	}
	transcript := func(what string, err error) { t.Logf("transcript: %s: %v", what, err) }
	s, err := p.State()
	transcript("state of a running CUDA process", err)
	assert.Equal(t, cu.PROCESS_STATE_RUNNING, s)
	_, err = cu.CheckpointProcessState(os.Getpid() + 1000000)
	transcript("state of no process", err)
	transcript("unlock while running", cu.CheckpointProcessUnlock(pid))
	transcript("checkpoint while running", cu.CheckpointProcessCheckpoint(pid))
	timed("lock", func() error { return p.Lock(10 * time.Second) })
	transcript("lock while locked", cu.CheckpointProcessLock(pid, time.Second))
	transcript("restore while locked", cu.CheckpointProcessRestore(pid, nil))
	timed("checkpoint "+gibs+" GiB", p.Checkpoint)
	free1, _, err := m.MemInfo(0)
	require.NoError(t, err)
	t.Logf("free device memory rose by %d bytes while checkpointed", int64(free1)-int64(free0))
	assert.GreaterOrEqual(t, int64(free1)-int64(free0), int64(mustAtoi(gibs))<<30, "the child's memory is given back")
	transcript("unlock while checkpointed", cu.CheckpointProcessUnlock(pid))
	transcript("checkpoint while checkpointed", cu.CheckpointProcessCheckpoint(pid))
	timed("restore", func() error { return p.Restore() })
	timed("unlock", p.Unlock)
	_, err = stdin.Write([]byte("check\n"))
	require.NoError(t, err)
	line, err = out.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "ok\n", line, "the child reads every byte back")
	require.NoError(t, cmd.Wait())
	_, err = cu.CheckpointProcessState(pid)
	transcript("state of the exited child", err)
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		panic(err)
	}
	return n
}
