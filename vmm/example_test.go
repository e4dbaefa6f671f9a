package vmm_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// The whole cycle: physical memory, an address range, a mapping, access, data, teardown.
// The README shows this body as it is (TestReadmeExample keeps the two the same).
func Example() {
	// On a machine with a GPU: b, err := vmm.CUDA() (errors.Is(err, loader.ErrNoDriver)
	// when there is no driver).
	b, err := sim.New(sim.PresetH200())
	if err != nil {
		log.Fatal(err)
	}
	m := vmm.New(b)
	g, err := m.Granularity(vmm.DeviceProps(0), false)
	if err != nil {
		log.Fatal(err)
	}
	mem, err := m.Create(4*g, vmm.DeviceProps(0)) // physical memory on device 0
	if err != nil {
		log.Fatal(err)
	}
	va, err := m.Reserve(4 * g) // virtual addresses
	if err != nil {
		log.Fatal(err)
	}
	mp, err := va.Map(0, mem)
	if err != nil {
		log.Fatal(err)
	}
	if err := mp.SetAccess(vmm.ReadWrite(0)...); err != nil {
		log.Fatal(err)
	}
	if err := m.WriteAt(0, []byte("hello, device"), mp.Addr()); err != nil {
		log.Fatal(err)
	}
	out := make([]byte, 13)
	if err := m.ReadAt(0, out, mp.Addr()); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (granularity %d MiB)\n", out, g>>20)

	// Unmap, free the addresses, release the memory.
	if err := errors.Join(mp.Close(), va.Close(), mem.Close()); err != nil {
		log.Fatal(err)
	}
	// Output: hello, device (granularity 2 MiB)
}

// Use the real driver when there is one, the simulator otherwise.
func ExampleCUDA() {
	var b vmm.Backend
	b, err := vmm.CUDA()
	if errors.Is(err, loader.ErrNoDriver) {
		b, _ = sim.New(sim.PresetH100())
	}
	n, _ := b.DeviceCount()
	fmt.Println(n > 0)
	// Output: true
}

// Errors name the operation and wrap the driver's result.
func ExampleError() {
	s, _ := sim.New(sim.PresetH200())
	m := vmm.New(s)
	_, err := m.Create(3<<20, vmm.DeviceProps(0)) // not a multiple of the 2 MiB granularity
	fmt.Println(err)
	fmt.Println(errors.Is(err, cu.ERROR_INVALID_VALUE))
	// Output:
	// vmm: create 3MiB on device 0: CUDA_ERROR_INVALID_VALUE: one or more of the parameters passed to the API call is not within an acceptable range of values (size is not a positive multiple of the granularity)
	// true
}

// A region laid out in one transaction: two chunks created and mapped with one access
// call, every byte written across both in one copy, and the second chunk taken back.
func ExampleRegion() {
	b, err := sim.New(sim.PresetH200())
	if err != nil {
		log.Fatal(err)
	}
	m := vmm.New(b)
	tx := m.Begin(nil)
	g, err := tx.NewRegion(8<<20, 0)
	if err != nil {
		log.Fatal(tx.Rollback(err))
	}
	var chunks []*vmm.Allocation
	for range 2 {
		a, err := tx.Create(2<<20, vmm.DeviceProps(0))
		if err != nil {
			log.Fatal(tx.Rollback(err))
		}
		chunks = append(chunks, a)
	}
	if err := tx.Add(g, 0, vmm.ReadWrite(0), chunks...); err != nil {
		log.Fatal(tx.Rollback(err))
	}
	tx.Commit()
	defer g.Close()

	_, err = g.WriteAt(make([]byte, 4<<20), 0)
	fmt.Println("write across both:", err)
	tx = m.Begin(nil)
	gone, err := tx.Remove(g, 2<<20, 2<<20)
	if err != nil {
		log.Fatal(tx.Rollback(err))
	}
	tx.Commit()
	fmt.Println("taken back:", len(gone), "chunk; mapped:", g.Used()>>20, "MiB")
	_ = gone[0].Alloc.Close() // it is the caller's now
	// Output:
	// write across both: <nil>
	// taken back: 1 chunk; mapped: 2 MiB
}
