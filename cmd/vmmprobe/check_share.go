package main

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
)

// The sharing checks export memory in this process and have a child process (vmmprobe run
// again) import it, through package vmm/ipc as a user's program would: ipc.Export and
// ipc.Send for a POSIX file descriptor, ipc.ExportFabric and the handle's text form for a
// fabric handle; the child imports with ipc.ReceiveAndImport or ipc.ImportFabric, checks
// every byte and writes its own, which this process reads back through its mapping.

// ipcSupported says whether the cross-process checks can run here; where they cannot,
// errIPCUnsupported is returned.
const ipcSupported = runtime.GOOS == "linux"

var errIPCUnsupported = errors.New("cross-process checks need Linux (descriptor passing over SCM_RIGHTS)")

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

// childError is the child's answer: Step "done", or the step that failed and why.
type childError struct {
	Step   string `json:"step"`
	Result string `json:"result,omitempty"`
	Msg    string `json:"error,omitempty"`
}

func (e *childError) Error() string { return "child process: " + e.Step + ": " + e.Msg }

// shareKind is a sharing check: the memory's handle type, the export check and the
// cross-process one that imports what it exported, the seed of its pattern, and its words.
type shareKind struct {
	handle      cu.MemHandleType
	export, ipc string
	seed        byte
	what, noun  string // what the device may not support; what the child imports
	ipcOK       string
}

var shareKinds = []shareKind{
	{cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "posix-fd-export", "posix-fd-ipc", 0x5a, "POSIX file descriptor handles", "descriptor",
		"a child process received the descriptor, imported and mapped it, read this process's bytes and wrote its own"},
	// Without an IMEX channel the driver refuses to create fabric memory with
	// CUDA_ERROR_NOT_PERMITTED although the device attribute says fabric handles are
	// supported; that is reported as unsupported, with the IMEX diagnosis and its remedy.
	{cu.MEM_HANDLE_TYPE_FABRIC, "fabric", "fabric-ipc", 0xfa, "fabric handles", "fabric handle",
		"a child process imported the fabric handle, mapped it, read this process's bytes and wrote its own"},
}

// share creates memory exportable as k's handle type, maps and fills it and exports it;
// then the child imports it.
func (c *checker) share(d deviceInfo, k shareKind) {
	dev, sz := d.Index, size(d)
	fabric := k.handle == cu.MEM_HANDLE_TYPE_FABRIC
	claimed := d.HandleTypes.PosixFD
	if fabric {
		claimed = d.HandleTypes.Fabric
	}
	p := vmm.DeviceProps(dev)
	p.HandleTypes = k.handle
	t, stage, err := openTrial(c.m, p, sz, []int{dev}, 0, k.seed, nil)
	if t != nil {
		defer t.close()
	}
	var exp *ipc.Exported
	var fh ipc.FabricHandle
	if err == nil && fabric {
		fh, err = ipc.ExportFabric(t.mem)
		stage = "export"
	} else if err == nil {
		exp, err = ipc.Export(c.m, t.mem)
		stage = "export"
	}
	r := result(k.export, dev, err, claimed, "")
	switch {
	case err == nil && fabric:
		r.Detail = "created, mapped and filled fabric memory and exported its handle"
	case err == nil:
		r.Detail = fmt.Sprintf("exported %s as a file descriptor", units.Size(sz))
	case !claimed:
		r.Detail = "the device does not support " + k.what + " (" + stage + " failed)"
	case fabric:
		c.explainFabric(&r, stage, err)
	default:
		r.Detail = stage + " failed"
	}
	c.add(r)
	if err != nil {
		c.add(skipped(k.ipc, dev, "not run: no "+k.noun+" to import (the "+k.export+" check is "+r.Status+")"))
		return
	}
	req := childRequest{Kind: kindPosixFD, Device: dev, Size: sz, Seed: k.seed}
	if fabric {
		req.Kind, req.Fabric = kindFabric, fh.String()
	} else {
		defer exp.Close()
	}
	c.addShared(k.ipc, dev, c.readBack(c.runIPC(req, exp), t, dev, k.seed), k.ipcOK)
}

// explainFabric says why a fabric step the device claims to support was refused: with
// CUDA_ERROR_NOT_PERMITTED and no usable IMEX channel it is unsupported, for that reason.
func (c *checker) explainFabric(r *checkResult, stage string, err error) {
	imex := c.doc.IMEX
	switch {
	case errors.Is(err, cu.ERROR_NOT_PERMITTED) && imex != nil && !imex.Ready:
		r.Status = statusUnsupported
		r.Detail = "the device attribute says fabric handles are supported, but " + stage +
			" is not permitted: " + imex.Diagnosis
		r.Remedy = imex.Remedy
	case errors.Is(err, cu.ERROR_NOT_PERMITTED) && imex != nil:
		r.Detail = stage + " is not permitted although an IMEX channel is accessible"
	default:
		r.Detail = stage + " failed"
	}
}

// readBack checks, after the child succeeded, that its write shows through this process's
// mapping of the memory.
func (c *checker) readBack(ierr error, t *trial, dev int, seed byte) error {
	if ierr != nil {
		return ierr
	}
	got := make([]byte, childWrite)
	err := c.m.ReadAt(dev, got, t.mp.Addr())
	if err == nil {
		err = compare(got, pattern.Bytes(seed+1, childWrite))
	}
	if err != nil {
		return fmt.Errorf("the child's write, read back here: %w", err)
	}
	return nil
}

// addShared reports a cross-process check from the child's answer.
func (c *checker) addShared(name string, dev int, ierr error, okDetail string) {
	r := result(name, dev, ierr, true, okDetail)
	var ce *childError
	switch {
	case ierr == nil:
	case errors.Is(ierr, errIPCUnsupported):
		r.Status, r.Error, r.Detail = statusUnsupported, "", errIPCUnsupported.Error()
	case errors.As(ierr, &ce):
		r.Result, r.Detail = ce.Result, "the child process failed at "+ce.Step
		if name == "fabric-ipc" && ce.Result == cu.ERROR_NOT_PERMITTED.Name() {
			c.explainFabric(&r, "the child's import", cu.ERROR_NOT_PERMITTED)
		}
	default:
		r.Detail = ""
	}
	c.add(r)
}

// runIPC has the child serve req (with exp, the descriptor message that follows a POSIX
// request), starting the child first if needed. A child that is gone or could not open
// its backend is dropped, so the next device starts a new one.
func (c *checker) runIPC(req childRequest, exp *ipc.Exported) error {
	if c.ipc == nil {
		ch, err := startIPCChild(c.opts.childSpec)
		if errors.Is(err, errIPCUnsupported) {
			return err
		}
		if err != nil {
			return &childError{Step: "start", Msg: err.Error()}
		}
		c.ipc = ch
	}
	err := c.ipc.run(req, exp)
	var ce *childError
	if errors.As(err, &ce) && (ce.Step == "exchange" || ce.Step == "open backend") {
		c.ipc.close()
		c.ipc = nil
	}
	return err
}
