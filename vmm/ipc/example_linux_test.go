package ipc_test

import (
	"fmt"
	"net"
	"os"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"golang.org/x/sys/unix"
)

// One process exports memory and sends it over a Unix socket; another (here the same, at
// the other end of a socket pair) receives, imports and maps it.
func Example() {
	s, _ := sim.New(sim.PresetH100())
	m := vmm.New(s)
	a, err := m.Create(2<<20, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	e, err := ipc.Export(m, a)
	if err != nil {
		panic(err)
	}
	defer e.Close() // the sender's descriptors stay its own

	fds, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, _ := net.FileConn(f)
		return c.(*net.UnixConn)
	}
	sender, receiver := conn(fds[0]), conn(fds[1])
	defer sender.Close()
	defer receiver.Close()
	if err := ipc.Send(sender, e); err != nil {
		panic(err)
	}

	imp, err := ipc.ReceiveAndImport(receiver, m, []int{0})
	if err != nil {
		panic(err)
	}
	defer imp.Close()
	_, _ = imp.WriteAt([]byte("shared"), 0)
	fmt.Println("receiver mapped", imp.Size()>>20, "MiB")
	// Output:
	// receiver mapped 2 MiB
}
