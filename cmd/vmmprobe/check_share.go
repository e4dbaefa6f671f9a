package main

import (
	"errors"
	"fmt"

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

// Seeds of the sharing checks' patterns.
const (
	seedPosixFD = 0x5a
	seedFabric  = 0xfa
)

// posixFD exports memory as a POSIX file descriptor, then has the child import it.
func (c *checker) posixFD(d deviceInfo) {
	dev := d.Index
	p := vmm.DeviceProps(dev)
	p.HandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	sz := size(d)
	t, stage, err := c.openTrial(p, sz, []int{dev}, [][2]int{{dev, dev}}, 0, seedPosixFD, nil)
	if t != nil {
		defer t.close()
	}
	var exp *ipc.Exported
	if err == nil {
		exp, err = ipc.Export(c.m, t.mem)
		stage = "export"
	}
	r := result("posix-fd-export", dev, err, d.HandleTypes.PosixFD, "")
	if err != nil {
		r.Detail = stage + " failed"
		if !d.HandleTypes.PosixFD {
			r.Detail = "the device does not support POSIX file descriptor handles (" + stage + " failed)"
		}
	} else {
		r.Detail = fmt.Sprintf("exported %s as a file descriptor", units.Size(sz))
	}
	r.Remedy = c.remedy("posix-fd-export", r, d)
	c.add(r)
	if err != nil {
		c.add(skipped("posix-fd-ipc", dev, "not run: no descriptor to import (the posix-fd-export check is "+r.Status+")"))
		return
	}
	defer exp.Close()
	ierr := c.runIPC(childRequest{Kind: kindPosixFD, Device: dev, Size: sz, Seed: seedPosixFD}, exp)
	c.addShared("posix-fd-ipc", d, c.readBack(ierr, t, dev, seedPosixFD),
		"a child process received the descriptor, imported and mapped it, read this process's bytes and wrote its own")
}

// fabric creates memory exportable as a fabric handle, maps it, fills it and exports the
// handle; then the child imports it (fabric-ipc). Without an IMEX channel the driver
// refuses the creation with CUDA_ERROR_NOT_PERMITTED although the device attribute says
// fabric handles are supported; that is reported as unsupported, with the IMEX diagnosis
// and its remedy.
func (c *checker) fabric(d deviceInfo) {
	dev := d.Index
	p := vmm.DeviceProps(dev)
	p.HandleTypes = cu.MEM_HANDLE_TYPE_FABRIC
	sz := size(d)
	t, stage, err := c.openTrial(p, sz, []int{dev}, [][2]int{{dev, dev}}, 0, seedFabric, nil)
	if t != nil {
		defer t.close()
	}
	var fh ipc.FabricHandle
	if err == nil {
		fh, err = ipc.ExportFabric(t.mem)
		stage = "export"
	}
	r := result("fabric", dev, err, d.HandleTypes.Fabric, "")
	switch {
	case err == nil:
		r.Detail = "created, mapped and filled fabric memory and exported its handle"
	case !d.HandleTypes.Fabric:
		r.Detail = "the device does not support fabric handles (" + stage + " failed)"
	default:
		c.explainFabric(&r, stage, err)
	}
	if r.Remedy == "" {
		r.Remedy = c.remedy("fabric", r, d)
	}
	c.add(r)
	if err != nil {
		c.add(skipped("fabric-ipc", dev, "not run: no fabric handle to import (the fabric check is "+r.Status+")"))
		return
	}
	ierr := c.runIPC(childRequest{Kind: kindFabric, Device: dev, Size: sz, Seed: seedFabric, Fabric: fh.String()}, nil)
	c.addShared("fabric-ipc", d, c.readBack(ierr, t, dev, seedFabric),
		"a child process imported the fabric handle, mapped it, read this process's bytes and wrote its own")
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
func (c *checker) addShared(name string, d deviceInfo, ierr error, okDetail string) {
	dev := d.Index
	var r checkResult
	var ce *childError
	switch {
	case ierr == nil:
		r = checkResult{Check: name, Device: intp(dev), Status: statusOK, Detail: okDetail}
	case errors.Is(ierr, errIPCUnsupported):
		r = checkResult{Check: name, Device: intp(dev), Status: statusUnsupported, Detail: errIPCUnsupported.Error()}
	case errors.As(ierr, &ce):
		r = checkResult{Check: name, Device: intp(dev), Status: statusFailed, Result: ce.Result, Error: ierr.Error(),
			Detail: "the child process failed at " + ce.Step}
		if name == "fabric-ipc" && ce.Result == cu.ERROR_NOT_PERMITTED.Name() {
			c.explainFabric(&r, "the child's import", cu.ERROR_NOT_PERMITTED)
		}
	default:
		r = result(name, dev, ierr, true, "")
	}
	if r.Remedy == "" {
		r.Remedy = c.remedy(name, r, d)
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
