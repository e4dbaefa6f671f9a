package main

import (
	"errors"
	"runtime"
	"time"

	"github.com/cuvmm/cuvmm/cu"
)

// ipcSupported says whether the cross-process checks can run here; where they cannot,
// errIPCUnsupported is returned.
const ipcSupported = runtime.GOOS == "linux"

var errIPCUnsupported = errors.New("cross-process checks need Linux (descriptor passing over SCM_RIGHTS)")

// envChild marks a re-executed vmmprobe as the child of the cross-process checks; its value
// names the backend the child opens (internal/backend's spec: "cuda" or "sim:PRESET").
const envChild = "CUVMM_VMMPROBE_CHILD"

// childTimeout bounds each exchange with the child (the first one includes loading the
// driver and creating a context).
const childTimeout = 2 * time.Minute

// What a child imports: a POSIX file descriptor (sent after the request through ipc.Send)
// or a fabric handle (in the request, in ipc.FabricHandle's text form).
const (
	kindPosixFD = "posix-fd"
	kindFabric  = "fabric"
)

// childRequest asks the child to import memory of Size bytes holding pattern(Seed), map it
// for Device, check every byte and write pattern(Seed+1) over the first childWrite bytes.
type childRequest struct {
	Kind   string `json:"kind"`
	Device int    `json:"device"`
	Size   uint64 `json:"size"`
	Seed   byte   `json:"seed"`
	Fabric string `json:"fabric,omitempty"`
}

// childWrite is how much the child writes back, for the parent to read through its own
// mapping.
const childWrite = 4096

// maxCheckSize bounds what a child agrees to read: the checks use one granule.
const maxCheckSize = 64 << 20

// childError is the child's answer: Step "done", or the step that failed and why.
type childError struct {
	Step   string `json:"step"`
	Result string `json:"result,omitempty"`
	Msg    string `json:"error,omitempty"`
}

func (e *childError) Error() string { return "child process: " + e.Step + ": " + e.Msg }

// failure is the answer for a step that failed with err, naming the driver's result.
func failure(step string, err error) childError {
	r := childError{Step: step, Msg: err.Error()}
	if res, ok := cu.ResultOf(err); ok {
		r.Result = res.Name()
	}
	return r
}

// limitedBuffer keeps the first max bytes written to it: the child's stderr, for messages.
type limitedBuffer struct {
	max int
	b   []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
