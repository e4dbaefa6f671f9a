package vmm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// CheckProps asks one attribute per feature requested, of the memory's device or, for host
// memory, of the device that uses it; plain device memory costs no call.
func TestCheckProps(t *testing.T) {
	ws, err := sim.New(sim.PresetWorkstation()) // VMM and compression; no RDMA, host memory or fabric
	if err != nil {
		t.Fatal(err)
	}
	m := vmm.New(ws)
	if err := m.CheckProps(vmm.DeviceProps(0), 0); err != nil || ws.Stats().Calls["Attribute"] != 0 {
		t.Fatalf("plain memory: %v, %d attribute calls", err, ws.Stats().Calls["Attribute"])
	}
	if err := m.CheckProps(vmm.Props{Location: vmm.OnDevice(0), Compressible: true, HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    vmm.Props
		want string
	}{
		{vmm.Props{Location: vmm.OnDevice(0), GPUDirectRDMA: true},
			"vmm: check props device 0: not supported by the device: GPUDirect RDMA with VMM (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0)"},
		{vmm.Props{Location: vmm.OnHost()},
			"vmm: check props host used by device 0: not supported by the device: host memory (CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)"},
		{vmm.Props{Location: vmm.OnHostNUMACurrent()}, "host NUMA memory"},
		{vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_FABRIC}, "fabric handles"},
	} {
		err := m.CheckProps(c.p, 0)
		if !errors.Is(err, vmm.ErrUnsupported) || !errors.Is(err, cu.ERROR_NOT_SUPPORTED) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q matching ErrUnsupported", c.p, err, c.want)
		}
	}
	// A device location names the device asked; a failed query is the driver's error.
	if err := m.CheckProps(vmm.Props{Location: vmm.OnDevice(3), Compressible: true}, 0); !errors.Is(err, cu.ERROR_INVALID_DEVICE) {
		t.Errorf("device 3: %v", err)
	}
	var nilm *vmm.Manager
	if err := nilm.CheckProps(vmm.Props{Location: vmm.OnDevice(0), Compressible: true}, 0); !errors.Is(err, vmm.ErrInvalid) {
		t.Errorf("nil Manager: %v", err)
	}
	if err := vmm.New(newSim(t)).CheckProps(vmm.Props{Location: vmm.OnHostNUMA(0), GPUDirectRDMA: true}, 0); err != nil {
		t.Errorf("H100: %v", err)
	}
}

// Errors made of several (a rollback that failed too, retries that failed again) read as one
// line, each part without its package.
func TestCauseOfJoinedErrors(t *testing.T) {
	unmap := &vmm.Error{Op: "unmap", Args: "0x1000+2MiB", Err: cu.ERROR_INVALID_VALUE}
	free := &vmm.Error{Op: "free", Args: "0x1000+2MiB", Err: cu.ERROR_OUT_OF_MEMORY}
	err := &vmm.Error{Pkg: "buffer", Op: "close", Err: errors.Join(unmap, free)}
	inval, oom := cu.ERROR_INVALID_VALUE.Error(), cu.ERROR_OUT_OF_MEMORY.Error()
	want := "buffer: close: unmap 0x1000+2MiB: " + inval + "; free 0x1000+2MiB: " + oom
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	// An error that wraps several with words between them keeps its words.
	broken := fmt.Errorf("%w: restore: %w", vmm.ErrBroken, unmap)
	err = &vmm.Error{Pkg: "sparse", Op: "decommit", Err: errors.Join(free, broken)}
	want = "sparse: decommit: free 0x1000+2MiB: " + oom + "; broken by a failed rollback: restore: vmm: unmap 0x1000+2MiB: " + inval
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}
