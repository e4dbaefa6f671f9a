package vmm_test

import (
	"errors"
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
