//go:build gpu && linux

package checkpoint_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
	if spec := os.Getenv(envChild); spec != "" {
		if err := child(spec); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// kid is a child process holding VMM memory (see child), driven line by line.
type kid struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.Writer
	out *bufio.Reader
	// ready is the rest of the child's "ready" line.
	ready string
}

func startKid(t testing.TB, spec string) *kid {
	t.Helper()
	cmd := reexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+spec)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	k := &kid{t: t, cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := k.out.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "ready"), "the child says %q", line)
	k.ready = strings.TrimSpace(strings.TrimPrefix(line, "ready"))
	return k
}

func (k *kid) pid() int { return k.cmd.Process.Pid }

// ask sends a command and returns the child's answer.
func (k *kid) ask(cmd string) string {
	k.t.Helper()
	_, err := io.WriteString(k.in, cmd+"\n")
	require.NoError(k.t, err)
	line, err := k.out.ReadString('\n')
	require.NoError(k.t, err, "the child's answer to %s", cmd)
	return strings.TrimSpace(line)
}

// quit asks the child to exit and waits for it.
func (k *kid) quit() {
	k.t.Helper()
	_, err := io.WriteString(k.in, "quit\n")
	require.NoError(k.t, err)
	require.NoError(k.t, k.cmd.Wait())
}

func cudaOrSkip(t testing.TB) *vmm.Manager {
	t.Helper()
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		t.Skip("no CUDA driver")
	}
	require.NoError(t, err)
	return vmm.New(b)
}

func gibsFromEnv(def string) string {
	if v := os.Getenv("CUVMM_CHECKPOINT_GIB"); v != "" {
		return v
	}
	return def
}

// transcript logs what the driver answered, for the recordings the fake driver replays.
func transcript(t testing.TB, what string, err error) { t.Logf("transcript: %s: %v", what, err) }

func preflight(t testing.TB, pid int, when string) checkpoint.Report {
	r := checkpoint.Preflight(os.DirFS("/"), pid)
	t.Logf("preflight %s: state %s, CUDA %v, GPUs %v %v, nvidiactl %d, dma-bufs %d, resident %d MiB, hazards %v, warnings %v", when, r.State, r.CUDA, r.GPUs, r.GPUUUIDs, r.Control, r.DmaBufs, r.Resident>>20, r.Hazards, r.Warnings)
	return r
}

// rss is the resident memory of process pid (VmRSS), in bytes.
func rss(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestGPUCheckpointRestore: a child holding CUVMM_CHECKPOINT_GIB GiB (16 by default) of VMM
// memory is locked, checkpointed (its device memory given back), restored and unlocked, and
// reads every byte back. Each call's time is logged, what the driver answers to calls in
// states that do not allow them, and what the preflight sees in each state.
func TestGPUCheckpointRestore(t *testing.T) {
	m := cudaOrSkip(t)
	gibs := gibsFromEnv("16")
	k := startKid(t, "vmm:"+gibs)
	pid := k.pid()
	free0, _, err := m.MemInfo(0)
	require.NoError(t, err)
	p, err := checkpoint.New(checkpoint.CUDA{}, pid)
	require.NoError(t, err)
	timed := func(what string, f func() error) {
		t0 := time.Now()
		require.NoError(t, f(), what)
		t.Logf("%s: %v", what, time.Since(t0))
	}
	r := preflight(t, pid, "running")
	assert.Empty(t, r.Hazards, "a clean CUDA process")
	assert.True(t, r.CUDA)
	assert.NotEmpty(t, r.GPUs)
	s, err := p.State()
	transcript(t, "state of a running CUDA process", err)
	assert.Equal(t, cu.PROCESS_STATE_RUNNING, s)
	_, err = cu.CheckpointProcessState(os.Getpid() + 1000000)
	transcript(t, "state of no process", err)
	transcript(t, "unlock while running", cu.CheckpointProcessUnlock(pid))
	transcript(t, "checkpoint while running", cu.CheckpointProcessCheckpoint(pid))
	timed("lock", func() error { return p.Lock(10 * time.Second) })
	preflight(t, pid, "locked")
	transcript(t, "lock while locked", cu.CheckpointProcessLock(pid, time.Second))
	transcript(t, "restore while locked", cu.CheckpointProcessRestore(pid, nil))
	rss0 := rss(t, pid)
	timed("checkpoint "+gibs+" GiB", p.Checkpoint)
	t.Logf("the child's resident memory rose by %d MiB", (rss(t, pid)-rss0)>>20)
	preflight(t, pid, "checkpointed")
	free1, _, err := m.MemInfo(0)
	require.NoError(t, err)
	t.Logf("free device memory rose by %d bytes while checkpointed", int64(free1)-int64(free0))
	assert.GreaterOrEqual(t, int64(free1)-int64(free0), int64(mustAtoi(gibs))<<30, "the child's memory is given back")
	transcript(t, "unlock while checkpointed", cu.CheckpointProcessUnlock(pid))
	transcript(t, "checkpoint while checkpointed", cu.CheckpointProcessCheckpoint(pid))
	timed("restore", func() error { return p.Restore() })
	timed("unlock", p.Unlock)
	assert.Equal(t, "ok", k.ask("check"), "the child reads every byte back")
	k.quit()
	_, err = cu.CheckpointProcessState(pid)
	transcript(t, "state of the exited child", err)
}

// TestGPULockTimeout: a lock waits for the CUDA calls in flight: with a kernel running
// 4 s under a synchronize, a lock with a 1 s timeout fails and leaves the process running,
// and one after the kernel locks. Then what a stopped process (SIGSTOP) does to a lock is
// recorded (bounded: it does not return), the package refuses it, and the preflight names
// that hazard.
func TestGPULockTimeout(t *testing.T) {
	cudaOrSkip(t)
	k := startKid(t, "vmm:1")
	pid := k.pid()
	p, err := checkpoint.New(checkpoint.CUDA{}, pid)
	require.NoError(t, err)
	_, err = io.WriteString(k.in, "spin 4000\n")
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond) // the kernel is launched and waited for
	t0 := time.Now()
	err = p.Lock(time.Second)
	t.Logf("transcript: lock during a 4 s kernel, timeout 1s: %v after %v", err, time.Since(t0))
	require.Error(t, err, "the lock times out")
	s, err := p.State()
	require.NoError(t, err)
	assert.Equal(t, cu.PROCESS_STATE_RUNNING, s, "a lock that timed out leaves it running")
	line, err := k.out.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ok\n", line, "the kernel and its synchronize")
	require.NoError(t, p.Lock(10*time.Second))
	require.NoError(t, p.Unlock())

	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	require.Eventually(t, func() bool { return checkpoint.Preflight(os.DirFS("/"), pid).State == "T" }, 5*time.Second, 10*time.Millisecond)
	r := preflight(t, pid, "stopped")
	require.NotEmpty(t, r.Hazards)
	assert.Contains(t, r.Hazards[0].What, "stopped")
	require.ErrorIs(t, p.Lock(time.Second), checkpoint.ErrStopped, "refused before the driver")
	// The driver's own lock, bounded here: on an H200 (driver 580) it had not returned
	// after five minutes with a timeout of 1 s.
	done := make(chan error, 1)
	t0 = time.Now()
	go func() { done <- cu.CheckpointProcessLock(pid, time.Second) }()
	select {
	case err := <-done:
		t.Logf("transcript: driver lock of a stopped process, timeout 1s: %v after %v", err, time.Since(t0))
	case <-time.After(3 * time.Second):
		t.Logf("transcript: driver lock of a stopped process, timeout 1s: no return after %v", time.Since(t0))
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		select {
		case err := <-done:
			t.Logf("transcript: after SIGCONT the lock returned %v, %v after it began", err, time.Since(t0))
		case <-time.After(20 * time.Second):
			t.Logf("transcript: after SIGCONT the lock still had not returned after %v", time.Since(t0))
		}
	}
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	if s, _ := p.State(); s == cu.PROCESS_STATE_LOCKED {
		t.Log("transcript: the process is locked after it")
		require.NoError(t, p.Unlock())
	}
	assert.Equal(t, "ok", k.ask("check"))
}

// TestGPURestoreOnOtherGPU: a child on device 0 is checkpointed and restored onto device 1
// by UUID (the driver's GPU remapping), then reads its data there. What the driver answers
// to a pair list without every GPU the process saw is recorded.
func TestGPURestoreOnOtherGPU(t *testing.T) {
	m := cudaOrSkip(t)
	n, err := cu.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skip("needs two GPUs")
	}
	var uuids []cu.UUID
	for i := range 2 {
		d, err := cu.DeviceGet(i)
		require.NoError(t, err)
		u, err := d.UUID()
		require.NoError(t, err)
		uuids = append(uuids, u)
	}
	k := startKid(t, "vmm:2")
	pid := k.pid()
	require.Equal(t, uuids[0].String(), k.ask("uuid"))
	p, err := checkpoint.New(checkpoint.CUDA{}, pid)
	require.NoError(t, err)
	require.NoError(t, p.Lock(10*time.Second))
	require.NoError(t, p.Checkpoint())
	free := func() [2]int64 {
		var f [2]int64
		for i := range 2 {
			v, _, err := m.MemInfo(i)
			require.NoError(t, err)
			f[i] = int64(v)
		}
		return f
	}
	before := free()
	err = p.Restore(cu.GPUPair{Old: uuids[0], New: uuids[1]})
	transcript(t, "restore with device 0 -> 1 only", err)
	if err != nil {
		s, serr := p.State()
		transcript(t, "state after it: "+s.String(), serr)
		err = p.Restore(cu.GPUPair{Old: uuids[0], New: uuids[1]}, cu.GPUPair{Old: uuids[1], New: uuids[0]})
		transcript(t, "restore with devices 0 <-> 1 swapped", err)
	}
	require.NoError(t, err, "the driver restores onto the other GPU")
	after := free()
	t.Logf("free memory fell by %d MiB on device 0 and %d MiB on device 1", (before[0]-after[0])>>20, (before[1]-after[1])>>20)
	assert.Greater(t, before[1]-after[1], int64(2)<<30, "the child's memory is on device 1 now")
	assert.Less(t, before[0]-after[0], int64(1)<<30, "not on device 0")
	require.NoError(t, p.Unlock())
	assert.Equal(t, "ok", k.ask("check"), "the child reads its data on the other GPU")
	t.Logf("the child's device 0 is %s after the restore (device 1 is %s)", k.ask("uuid"), uuids[1])
}

// TestGPURestoreOutOfMemory: a restore onto a GPU whose memory another process took fails;
// what the driver answers and the state it leaves are recorded, and once the memory is free
// again the restore works and the child reads its bytes.
func TestGPURestoreOutOfMemory(t *testing.T) {
	m := cudaOrSkip(t)
	k := startKid(t, "vmm:4")
	p, err := checkpoint.New(checkpoint.CUDA{}, k.pid())
	require.NoError(t, err)
	require.NoError(t, p.Lock(10*time.Second))
	require.NoError(t, p.Checkpoint())
	free, _, err := m.MemInfo(0)
	require.NoError(t, err)
	var filler []*vmm.Allocation
	defer func() {
		for _, a := range filler {
			_ = a.Close()
		}
	}()
	for left := free; left > 2<<30; left -= 1 << 30 { // all but 1-2 GiB
		a, err := m.Create(1<<30, vmm.DeviceProps(0))
		if err != nil {
			break
		}
		filler = append(filler, a)
	}
	left, _, err := m.MemInfo(0)
	require.NoError(t, err)
	t.Logf("filled device 0: %d MiB left of %d", left>>20, free>>20)
	err = p.Restore()
	transcript(t, "restore of 4 GiB with the device full", err)
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	s, serr := p.State()
	transcript(t, "state after it: "+s.String(), serr)
	assert.Equal(t, cu.PROCESS_STATE_CHECKPOINTED, s)
	for _, a := range filler {
		require.NoError(t, a.Close())
	}
	filler = nil
	// Recorded on an H200 (driver 580): the retry fails (OPERATING_SYSTEM) and the process
	// stays checkpointed for good; hence the free-memory check before a restore.
	err = p.Restore()
	transcript(t, "restore again with the memory free", err)
	if err == nil {
		require.NoError(t, p.Unlock())
		assert.Equal(t, "ok", k.ask("check"))
	}
}

// TestGPUCheckpointExporter: a child that exported VMM memory as a POSIX descriptor to a
// third process (a grandchild that maps it): the preflight flags both; the exporter is
// checkpointed and restored, then the importer; the driver's answers are recorded, and
// whether the two still share the memory afterwards (a write on one side read on the
// other).
func TestGPUCheckpointExporter(t *testing.T) {
	cudaOrSkip(t)
	k := startKid(t, "export:1")
	importer, err := strconv.Atoi(k.ready)
	require.NoError(t, err, "the child names the importer")
	require.Equal(t, "shared", k.ask("poke 7"), "before any checkpoint")
	preflight(t, k.pid(), "exporter")
	preflight(t, importer, "importer")
	for _, pid := range []int{k.pid(), importer} {
		r := preflight(t, pid, "of a process sharing memory")
		assert.Equal(t, 2, r.Control, "its own /dev/nvidiactl and the exported or imported memory's")
		assert.NotEmpty(t, r.Warnings)
	}
	// The exporter: checkpointed and restored, it no longer shares the memory.
	p, err := checkpoint.New(checkpoint.CUDA{}, k.pid())
	require.NoError(t, err)
	require.NoError(t, p.Lock(10*time.Second))
	transcript(t, "checkpoint of the exporter of shared memory", p.Checkpoint())
	transcript(t, "restore of the exporter", p.Restore())
	transcript(t, "unlock of the exporter", p.Unlock())
	t.Logf("transcript: after the exporter's checkpoint and restore the two processes: %s", k.ask("poke 9"))
	// The importer: its checkpoint works and its restore does not (it stays checkpointed:
	// its next CUDA call would block for good, so nothing more is asked of it).
	p, err = checkpoint.New(checkpoint.CUDA{}, importer)
	require.NoError(t, err)
	require.NoError(t, p.Lock(10*time.Second))
	transcript(t, "checkpoint of the importer", p.Checkpoint())
	err = p.Restore()
	transcript(t, "restore of the importer", err)
	if err == nil {
		require.NoError(t, p.Unlock())
		t.Logf("transcript: after the importer's restore: %s", k.ask("poke 11"))
	}
	require.NoError(t, syscall.Kill(importer, syscall.SIGKILL))
}

// TestGPUSleepThenCheckpoint: a child with 8 GiB of weights and 8 GiB of KV cache under
// the sleep package's tags is checkpointed whole, then again after discarding the KV cache;
// the time and the host memory the checkpoint took are logged for both, and after waking
// the weights read back and the KV cache reads zero.
func TestGPUSleepThenCheckpoint(t *testing.T) {
	cudaOrSkip(t)
	k := startKid(t, "sleep:8:8")
	pid := k.pid()
	p, err := checkpoint.New(checkpoint.CUDA{}, pid)
	require.NoError(t, err)
	round := func(what string) {
		require.NoError(t, p.Lock(10*time.Second))
		r0 := rss(t, pid)
		t0 := time.Now()
		require.NoError(t, p.Checkpoint())
		ck := time.Since(t0)
		saved := rss(t, pid) - r0
		t0 = time.Now()
		require.NoError(t, p.Restore())
		rs := time.Since(t0)
		require.NoError(t, p.Unlock())
		t.Logf("sleep-first: %s: checkpoint %v, restore %v, host memory taken %d MiB", what, ck, rs, saved>>20)
	}
	round("weights 8 GiB + KV 8 GiB, all resident")
	require.Equal(t, "ok", k.ask("discard"))
	round("weights 8 GiB, KV discarded first")
	require.Equal(t, "ok", k.ask("wake"))
	assert.Equal(t, "ok", k.ask("check"), "the weights read back and the KV cache reads zero")
}

// BenchmarkGPUCheckpoint: lock, checkpoint, restore and unlock of one child holding
// CUVMM_CHECKPOINT_GIB GiB (16 by default), alternating CUVMM_CHECKPOINT_REPS times (3)
// between the C program at CUVMM_CHECKPOINT_C (bench/c/checkpoint.c, the driver's calls
// alone) and this package (each call checked against the state before and after it);
// reports the medians and their ratios, and checks every byte at the end.
func BenchmarkGPUCheckpoint(b *testing.B) {
	cudaOrSkip(b)
	cprog := os.Getenv("CUVMM_CHECKPOINT_C")
	if cprog == "" {
		b.Skip("CUVMM_CHECKPOINT_C names no C program (bench/c/checkpoint.c)")
	}
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("CUVMM_CHECKPOINT_REPS")); err == nil && v > 0 {
		reps = v
	}
	k := startKid(b, "vmm:"+gibsFromEnv("16"))
	pid := k.pid()
	p, err := checkpoint.New(checkpoint.CUDA{}, pid)
	require.NoError(b, err)
	steps := []string{"lock", "checkpoint", "restore", "unlock"}
	c, g := map[string][]float64{}, map[string][]float64{}
	for range b.N {
		for range reps {
			out, err := exec.Command(cprog, strconv.Itoa(pid)).CombinedOutput()
			require.NoError(b, err, "%s", out)
			f := strings.Fields(string(out))
			require.Len(b, f, 9, "%s", out)
			for i, s := range steps {
				require.Equal(b, s, f[1+2*i])
				ns, err := strconv.ParseFloat(f[2+2*i], 64)
				require.NoError(b, err)
				c[s] = append(c[s], ns/1e6)
			}
			calls := []func() error{func() error { return p.Lock(0) }, p.Checkpoint, func() error { return p.Restore() }, p.Unlock}
			for i, s := range steps {
				t0 := time.Now()
				require.NoError(b, calls[i](), s)
				g[s] = append(g[s], float64(time.Since(t0).Nanoseconds())/1e6)
			}
		}
	}
	require.Equal(b, "ok", k.ask("check"), "the child reads every byte back")
	med := func(v []float64) float64 { v = append([]float64(nil), v...); sort.Float64s(v); return v[len(v)/2] }
	var ctotal, gtotal float64
	for _, s := range steps {
		cm, gm := med(c[s]), med(g[s])
		ctotal += cm
		gtotal += gm
		b.ReportMetric(cm, "c-"+s+"-ms")
		b.ReportMetric(gm, "go-"+s+"-ms")
		if s == "checkpoint" || s == "restore" {
			b.ReportMetric(gm/cm, "go/c-"+s)
		}
		b.Logf("%s: C %v ms, Go %v ms", s, c[s], g[s])
	}
	b.ReportMetric(gtotal-ctotal, "go-minus-c-lock-to-unlock-ms")
	b.ReportMetric(med(g["lock"])+med(g["unlock"]), "go-lock+unlock-ms")
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		panic(err)
	}
	return n
}
