package kv_test

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/kv"
)

// A serving loop's step path: the committer keeps a page ahead of every slot, so Ensure
// finds the pages mapped and makes no driver call.
func Example() {
	s, _ := sim.New(sim.PresetH200()) // on a GPU: b, err := vmm.CUDA()
	m := vmm.New(s)
	c, err := kv.New(m, kv.Geometry{Planes: 4, BytesPerToken: 2048, Slots: 2, MaxTokens: 4096}, kv.Options{Ahead: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_ = c.Ready() // a page mapped ahead in every slot

	// One request decoding in slot 0, a token a step, across a page boundary: between
	// steps (Ready here) the committer maps the next page ahead.
	for tokens := 1; tokens <= 1500; tokens++ {
		if tokens == 1024 {
			_ = c.Ready()
		}
		if err := c.Ensure(0, tokens); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Slot 0's K tensor of layer 1 (plane 2) starts here for the request's whole life; its
	// token 1400 is on the second page.
	k := c.Plane(2) + cu.DevicePtr(0*c.SlotBytes())
	if err := m.WriteAt(0, []byte("token 1400"), k+1400*2048); err != nil {
		fmt.Println(err)
		return
	}
	_ = c.Ready()   // the next step: a page ahead again
	st := c.Stats() // slot 0: 2 pages in use and 1 ahead; slot 1: 1 ahead
	fmt.Println("pages:", st.Pages, "driver calls on the step path:", st.StepCalls)
	_ = c.Release(0) // its pages stay mapped for the slot's next request
	// Output:
	// pages: 4 driver calls on the step path: 0
}
