// Command vmmprobe reports what the CUDA driver's virtual memory management can do on this
// node.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
)

// Exit codes, documented in --help and the README.
const (
	exitOK       = 0
	exitUsage    = 2
	exitNoDriver = 3
	exitNoDevice = 4
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vmmprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: vmmprobe [flags]

Reports the CUDA driver and, for each device, what virtual memory management supports.

Exit codes: 0 ok, 2 usage error, 3 no CUDA driver could be loaded, 4 no device.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vmmprobe: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	if err := cu.Init(); err != nil {
		fmt.Fprintln(stderr, "vmmprobe:", err)
		if errors.Is(err, loader.ErrNoDriver) {
			return exitNoDriver
		}
		return exitNoDevice
	}
	v, err := cu.DriverVersion()
	if err != nil {
		fmt.Fprintln(stderr, "vmmprobe:", err)
		return exitNoDriver
	}
	n, err := cu.DeviceCount()
	if err != nil || n == 0 {
		fmt.Fprintf(stderr, "vmmprobe: no CUDA device (%v)\n", err)
		return exitNoDevice
	}
	fmt.Fprintf(stdout, "driver %s, CUDA %d.%d, %d device(s)\n", cu.LibraryPath(), v/1000, v%1000/10, n)
	for i := range n {
		d, err := cu.DeviceGet(i)
		if err != nil {
			fmt.Fprintf(stdout, "  %d: %v\n", i, err)
			continue
		}
		name, _ := d.Name()
		vmm, _ := d.Flag(cu.DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
		fmt.Fprintf(stdout, "  %d: %s, VMM %v\n", i, name, vmm)
	}
	return exitOK
}
