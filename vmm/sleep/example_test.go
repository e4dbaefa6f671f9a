package sleep_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/sleep"
	"github.com/cuvmm/cuvmm/vmm/sparse"
)

// An inference engine's memory sleeps between rollouts and wakes at the same addresses.
func Example() {
	s, _ := sim.New(sim.PresetH200()) // on a GPU: b, err := vmm.CUDA()
	m := vmm.New(s)
	p := sleep.New(m, sleep.Options{})
	defer p.Close()

	weights, err := p.Alloc("engine", 256<<20, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = weights.WriteAt([]byte("weights"), 0)
	base := weights.Base()
	_ = p.Prepare("engine") // pin the host memory now, not on the way to sleep

	ctx := context.Background()
	if err := p.Sleep(ctx, "engine", sleep.Offload); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("asleep:", p.States("engine")[sleep.Offloaded]>>20, "MiB offloaded")
	_, err = weights.ReadAt(make([]byte, 7), 0)
	fmt.Println("read while asleep:", err != nil)

	if err := p.Wake(ctx, "engine"); err != nil {
		fmt.Println(err)
		return
	}
	b := make([]byte, 7)
	_, _ = weights.ReadAt(b, 0)
	fmt.Println("awake:", string(b), "at the same address:", weights.Base() == base)
	// Output:
	// asleep: 256 MiB offloaded
	// read while asleep: true
	// awake: weights at the same address: true
}

// A KV cache kept in a sparse array sleeps with the engine: discarded, it wakes reading
// zero, and the array refuses commits while it sleeps.
func ExamplePool_Tag() {
	s, _ := sim.New(sim.PresetH200())
	m := vmm.New(s)
	kv, err := sparse.New(m, 1<<30, sparse.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer kv.Close()
	_, _ = kv.WriteAt([]byte("tokens"), 64<<20)
	p := sleep.New(m, sleep.Options{})
	defer p.Close()
	if err := p.Tag("engine", kv); err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_ = p.Sleep(ctx, "engine", sleep.Discard)
	fmt.Println("commit while asleep:", errors.Is(kv.Commit(0, 1), vmm.ErrAsleep))
	_ = p.Wake(ctx, "engine")
	b := make([]byte, 6)
	_, _ = kv.ReadAt(b, 64<<20)
	fmt.Printf("awake: %q\n", b)
	// Output:
	// commit while asleep: true
	// awake: "\x00\x00\x00\x00\x00\x00"
}
