// Command ipc shares device memory between two processes: the parent grows a buffer of
// exportable memory, exports its chunks as file descriptors and sends them over a Unix
// socket (SCM_RIGHTS); the child (this program, started again) imports and maps them,
// checks every byte and writes a reply that the parent then reads through its own mapping.
// Both count their open descriptors to show that none leaked.
//
//	go run ./examples/ipc [--backend=auto|cuda|sim] [--preset NAME] [--device N] [--child-device M]
//
// The parent's memory lives on --device (default 0). The child maps it for --child-device
// (default: the same device) and reads and writes it from that device's context. A child
// device other than the parent's needs peer access from it to the parent's device
// (cuDeviceCanAccessPeer): both sides check it first and say so when there is none. Each
// side prints the device it used.
//
// Descriptor passing needs Linux; elsewhere it says so and exits 0. It exits 0 when
// everything verified, 1 when something did not (or the devices cannot share), 2 on a
// usage error and 3 when --backend=cuda finds no driver.
package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/cuvmm/cuvmm/examples/internal/run"
	"github.com/cuvmm/cuvmm/vmm"
)

func main() { run.Main(realMain) }

const (
	mib       = 1 << 20
	seed      = 42
	replySeed = 43
)

// devices are the parent's device, which owns the memory, and the child's, for which the
// child maps the memory and from whose context it copies.
type devices struct {
	parent, child int
}

func realMain(args []string, stdout, stderr io.Writer) int {
	var child bool
	var d devices
	var childDev optionalInt
	f, code, ok := run.Parse("ipc", args, "h100", stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&child, "child", false, "run as the importing child (internal: the socket is descriptor 3)")
		fs.IntVar(&d.parent, "device", 0, "device `ordinal` the parent's memory lives on")
		fs.Var(&childDev, "child-device", "device `ordinal` the child maps the memory for and copies from (default: --device)")
	})
	if !ok {
		return code
	}
	d.child = d.parent
	if childDev.set {
		d.child = childDev.n
	}
	if d.parent < 0 || d.child < 0 {
		fmt.Fprintln(stderr, "ipc: --device and --child-device must be 0 or more")
		return run.ExitUsage
	}
	if child {
		return childMain(f, d, stdout, stderr)
	}
	be, code, err := run.Open("ipc", f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ipc:", err)
		return code
	}
	r := &run.Report{W: stdout}
	fmt.Fprintf(stdout, "ipc: backend %s, parent on device %d, child on device %d\n", be.Name(), d.parent, d.child)
	if !r.Check(checkDevices(be, d), "parent: %s", d) {
		return r.Exit()
	}
	parent(r, be, f, d)
	return r.Exit()
}

// optionalInt is an int flag that knows whether it was given.
type optionalInt struct {
	n   int
	set bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.Itoa(o.n)
}

func (o *optionalInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return err
	}
	o.n, o.set = int(n), true
	return nil
}

// String says what checkDevices verifies.
func (d devices) String() string {
	if d.parent == d.child {
		return fmt.Sprintf("device %d exists (the child maps the memory for it too)", d.parent)
	}
	return fmt.Sprintf("devices %d and %d exist, and device %d has peer access to device %d's memory", d.parent, d.child, d.child, d.parent)
}

// checkDevices says whether both devices exist and the child's device can reach memory of
// the parent's: mapping memory of device A for device B needs peer access from B to A.
func checkDevices(be vmm.Backend, d devices) error {
	n, err := be.DeviceCount()
	if err != nil {
		return fmt.Errorf("device count: %w", err)
	}
	for _, dev := range []int{d.parent, d.child} {
		if dev >= n {
			return fmt.Errorf("no device %d: the %s backend has %d device(s)", dev, be.Name(), n)
		}
	}
	if d.child == d.parent {
		return nil
	}
	ok, err := be.CanAccessPeer(d.child, d.parent)
	if err != nil {
		return fmt.Errorf("can device %d access device %d: %w", d.child, d.parent, err)
	}
	if !ok {
		return fmt.Errorf("device %d has no peer access to device %d (cuDeviceCanAccessPeer says no), "+
			"so the child cannot map the parent's memory for it: use one device for both, or a pair with peer access (vmmprobe lists them)",
			d.child, d.parent)
	}
	return nil
}
