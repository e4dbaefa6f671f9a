package ipc_test

import (
	"fmt"
	"net"
	"os"

	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/buffer"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"golang.org/x/sys/unix"
)

// The process that owns the GPU memory exports a buffer of several chunks as one dma-buf
// and sends it over a Unix socket to the process that drives the NIC (here the same, at the
// other end of a socket pair), which registers it (ibv_reg_dmabuf_mr) and needs no CUDA.
func ExampleSendDmaBuf() {
	s, _ := sim.New(sim.PresetH200())
	b, err := buffer.New(vmm.New(s), 4<<20, buffer.Options{Policy: buffer.Exact})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if err := b.Grow(8 << 20); err != nil {
		panic(err)
	}
	d, err := b.ExportDmaBuf()
	if err != nil {
		panic(err)
	}
	defer d.Close() // the sender's descriptor stays its own

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
	if err := ipc.SendDmaBuf(sender, d); err != nil {
		panic(err)
	}

	got, err := ipc.ReceiveDmaBuf(receiver)
	if err != nil {
		panic(err)
	}
	defer got.Close()
	fmt.Printf("received a dma-buf of %d MiB (%d chunks of device %d at %v)\n", got.Size>>20, got.Chunks, got.Device, got.Addr)
	// Output:
	// received a dma-buf of 8 MiB (2 chunks of device 0 at 0x302000000)
}
