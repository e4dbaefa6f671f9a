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

	for tokens := 1; tokens <= 512; tokens++ { // one request decoding in slot 0
		if err := c.Ensure(0, tokens); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Slot 0's K tensor of layer 1 (plane 2) starts here for the request's whole life.
	k := c.Plane(2) + cu.DevicePtr(0*c.SlotBytes())
	_ = m.WriteAt(0, []byte("token 0"), k)
	fmt.Println("driver calls on the step path:", c.Stats().StepCalls)
	_ = c.Release(0) // its pages stay mapped for the slot's next request
	// Output:
	// driver calls on the step path: 0
}
