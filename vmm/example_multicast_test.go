package vmm_test

import (
	"fmt"
	"log"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// A multicast object over two GPUs of an NVSwitch host (simulated: creating one on a shared
// host's real fabric is not something to do casually), bound to memory of each, mapped, and
// written once to reach both.
func ExampleMulticast() {
	s, err := sim.New(sim.PresetHGX8())
	if err != nil {
		log.Fatal(err)
	}
	m := vmm.New(s)
	props := vmm.MulticastProps{Devices: 2}
	if props.Size, err = m.MulticastGranularity(props, true); err != nil {
		log.Fatal(err)
	}
	mc, err := m.CreateMulticast(props)
	if err != nil {
		log.Fatal(err)
	}
	defer mc.Close()
	for dev := range 2 {
		if err := mc.AddDevice(dev); err != nil {
			log.Fatal(err)
		}
	}
	var mems []*vmm.Allocation
	for dev := range 2 {
		mem, err := m.Create(props.Size, vmm.DeviceProps(dev))
		if err != nil {
			log.Fatal(err)
		}
		defer mem.Close()
		if err := mc.Bind(0, mem, 0, props.Size); err != nil {
			log.Fatal(err)
		}
		mems = append(mems, mem)
	}

	r, err := m.Reserve(props.Size)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	mp, err := r.MapMulticast(0, mc)
	if err != nil {
		log.Fatal(err)
	}
	if err := mp.SetAccess(vmm.ReadWrite(0, 1)...); err != nil {
		log.Fatal(err)
	}
	if err := m.WriteAt(0, []byte("to all"), mp.Addr()); err != nil {
		log.Fatal(err)
	}

	// Each device's own memory holds what was written through the multicast mapping.
	for dev, mem := range mems {
		local, err := m.Reserve(props.Size)
		if err != nil {
			log.Fatal(err)
		}
		lm, err := local.Map(0, mem)
		if err != nil {
			log.Fatal(err)
		}
		if err := lm.SetAccess(vmm.ReadWrite(dev)...); err != nil {
			log.Fatal(err)
		}
		out := make([]byte, 6)
		if err := m.ReadAt(dev, out, lm.Addr()); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("device %d: %s\n", dev, out)
		if err := local.Close(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// device 0: to all
	// device 1: to all
}
