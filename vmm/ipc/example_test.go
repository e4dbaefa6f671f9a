package ipc_test

import (
	"encoding/json"
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
)

// A fabric handle travels as text (here in JSON) to the process that imports it. On the
// simulator an IMEX channel is one configuration field; on a real node it is
// /dev/nvidia-caps-imex-channels.
func ExampleFabricHandle() {
	cfg := sim.PresetH100()
	cfg.IMEX = true
	s, _ := sim.New(cfg)
	m := vmm.New(s)
	a, err := m.Create(2<<20, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_FABRIC})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	fh, err := ipc.ExportFabric(a)
	if err != nil {
		panic(err)
	}
	msg, _ := json.Marshal(struct{ Memory ipc.FabricHandle }{fh})

	// ... in the importing process:
	var in struct{ Memory ipc.FabricHandle }
	if err := json.Unmarshal(msg, &in); err != nil {
		panic(err)
	}
	imp, err := ipc.ImportFabric(m, []ipc.FabricHandle{in.Memory}, []int{0})
	if err != nil {
		panic(err)
	}
	defer imp.Close()
	fmt.Println("imported", imp.Size()>>20, "MiB")
	// Output:
	// imported 2 MiB
}

// The header that precedes the descriptors on the socket.
func ExampleHeader() {
	h := ipc.Header{HandleType: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, Granularity: 2 << 20, Sizes: []uint64{2 << 20, 4 << 20}}
	b, _ := h.MarshalBinary()
	var back ipc.Header
	fmt.Println(len(b), "bytes,", back.UnmarshalBinary(b), back.Total()>>20, "MiB")
	// Output:
	// 48 bytes, <nil> 6 MiB
}
