package cu

import (
	"math"
	"runtime"
	"time"
	"unsafe"
)

// ProcessState is the state of a CUDA process for checkpoint and restore (CUprocessState).
type ProcessState int32

// The process states.
const (
	PROCESS_STATE_RUNNING      ProcessState = 0 // CUDA calls run
	PROCESS_STATE_LOCKED       ProcessState = 1 // CUDA calls block
	PROCESS_STATE_CHECKPOINTED ProcessState = 2 // its GPU memory is in host memory, its GPU resources released
	PROCESS_STATE_FAILED       ProcessState = 3 // a checkpoint or restore failed beyond repair
)

func (s ProcessState) String() string { return enumName(s, processStateNames[:], "ProcessState") }

var processStateNames = [...]string{
	PROCESS_STATE_RUNNING:      "running",
	PROCESS_STATE_LOCKED:       "locked",
	PROCESS_STATE_CHECKPOINTED: "checkpointed",
	PROCESS_STATE_FAILED:       "failed",
}

// checkpointLockArgs is CUcheckpointLockArgs (64 bytes).
type checkpointLockArgs struct {
	timeoutMs uint32
	_         uint32
	_         [7]uint64
}

// checkpointArgs is CUcheckpointCheckpointArgs and CUcheckpointUnlockArgs (64 bytes, all
// reserved).
type checkpointArgs struct{ _ [8]uint64 }

// checkpointRestoreArgs is CUcheckpointRestoreArgs (64 bytes).
type checkpointRestoreArgs struct {
	gpuPairs      uintptr // *GPUPair, kept alive by the caller
	gpuPairsCount uint32
	_             [44]byte
	_             uint64
}

// GPUPair remaps a GPU on restore: the checkpointed process's GPU Old comes back on New
// (CUcheckpointGpuPair; the same chip, with enough memory).
type GPUPair struct{ Old, New UUID }

// checkpointPID is pid as the driver takes it (an int), or an error naming op: a pid that
// does not fit would name another process.
func checkpointPID(op string, pid int) (int32, error) {
	if pid <= 0 || pid > math.MaxInt32 {
		return 0, wrap(invalidArg("not a process id"), op, "pid %d", pid)
	}
	return int32(pid), Init()
}

// CheckpointProcessState returns the state of CUDA process pid
// (cuCheckpointProcessGetState).
func CheckpointProcessState(pid int) (ProcessState, error) {
	p, err := checkpointPID("cuCheckpointProcessGetState", pid)
	if err != nil {
		return 0, err
	}
	s, err := cuCheckpointProcessGetState(p)
	return s, wrap(err, "cuCheckpointProcessGetState", "pid %d", pid)
}

// CheckpointProcessRestoreThreadID returns the thread of pid that restores it
// (cuCheckpointProcessGetRestoreThreadId).
func CheckpointProcessRestoreThreadID(pid int) (int, error) {
	p, err := checkpointPID("cuCheckpointProcessGetRestoreThreadId", pid)
	if err != nil {
		return 0, err
	}
	tid, err := cuCheckpointProcessGetRestoreThreadId(p)
	return int(tid), wrap(err, "cuCheckpointProcessGetRestoreThreadId", "pid %d", pid)
}

// CheckpointProcessLock blocks pid's further CUDA calls, waiting at most timeout (0: no
// limit, rounded up to milliseconds) for those in flight (cuCheckpointProcessLock). The
// process must be running; on a timeout it stays running.
func CheckpointProcessLock(pid int, timeout time.Duration) error {
	ms := timeout / time.Millisecond // rounded up below: timeout+999999ns would overflow near the largest Duration
	if timeout%time.Millisecond != 0 {
		ms++
	}
	if timeout < 0 || ms > 1<<32-1 {
		return wrap(ERROR_INVALID_VALUE, "cuCheckpointProcessLock", "pid %d, timeout %v", pid, timeout)
	}
	p, err := checkpointPID("cuCheckpointProcessLock", pid)
	if err != nil {
		return err
	}
	err = cuCheckpointProcessLock(p, &checkpointLockArgs{timeoutMs: uint32(ms)})
	return wrap(err, "cuCheckpointProcessLock", "pid %d, timeout %v", pid, timeout)
}

// CheckpointProcessCheckpoint copies locked process pid's GPU memory into host memory and
// releases its GPU resources (cuCheckpointProcessCheckpoint).
func CheckpointProcessCheckpoint(pid int) error {
	p, err := checkpointPID("cuCheckpointProcessCheckpoint", pid)
	if err != nil {
		return err
	}
	return wrap(cuCheckpointProcessCheckpoint(p, &checkpointArgs{}), "cuCheckpointProcessCheckpoint", "pid %d", pid)
}

// CheckpointProcessRestore brings checkpointed process pid's GPU memory back, onto other
// GPUs where pairs say so (every checkpointed GPU then, cuCheckpointProcessRestore); the
// process is locked afterwards.
func CheckpointProcessRestore(pid int, pairs []GPUPair) error {
	p, err := checkpointPID("cuCheckpointProcessRestore", pid)
	if err != nil {
		return err
	}
	args := &checkpointRestoreArgs{gpuPairsCount: uint32(len(pairs))}
	if len(pairs) > 0 {
		args.gpuPairs = uintptr(unsafe.Pointer(&pairs[0]))
	}
	err = cuCheckpointProcessRestore(p, args)
	runtime.KeepAlive(pairs)
	return wrap(err, "cuCheckpointProcessRestore", "pid %d, %d GPU pairs", pid, len(pairs))
}

// CheckpointProcessUnlock lets locked process pid make CUDA calls again
// (cuCheckpointProcessUnlock).
func CheckpointProcessUnlock(pid int) error {
	p, err := checkpointPID("cuCheckpointProcessUnlock", pid)
	if err != nil {
		return err
	}
	return wrap(cuCheckpointProcessUnlock(p, &checkpointArgs{}), "cuCheckpointProcessUnlock", "pid %d", pid)
}
