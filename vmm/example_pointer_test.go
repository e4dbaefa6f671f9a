package vmm_test

import (
	"fmt"
	"log"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// Code handed a device address finds out what it points to and how another process could
// get at the memory.
func ExampleManager_Pointer() {
	s, err := sim.New(sim.PresetH200())
	if err != nil {
		log.Fatal(err)
	}
	m := vmm.New(s)
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	if err != nil {
		log.Fatal(err)
	}
	props := vmm.DeviceProps(0)
	props.HandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	a, err := m.Create(g, props)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	r, err := m.Reserve(g)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	mp, err := r.Map(0, a)
	if err != nil {
		log.Fatal(err)
	}
	if err := mp.SetAccess(vmm.ReadWrite(0)...); err != nil {
		log.Fatal(err)
	}

	p, err := m.Pointer(mp.Addr() + 100)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("VMM:", p.VMM, "device:", p.DeviceOrdinal, "mapping starts at the buffer:", p.MappingBase == mp.Addr())
	how, why := p.Share()
	fmt.Println(how)
	fmt.Println(why)
	// Output:
	// VMM: true device: 0 mapping starts at the buffer: true
	// posix-fd
	// the allocation allows POSIX file descriptors: export one (Allocation.ExportFD) and pass it over a Unix socket (vmm/ipc) to a process on this node
}
