// Command probe runs the probe cases against the real driver.
package main

import (
	"fmt"
	"os"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim/internal/probe"
	"github.com/cuvmm/cuvmm/vmm"
)

func main() {
	b, err := vmm.CUDA()
	if err != nil {
		fmt.Println("no driver:", err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == "2" {
		d, _ := cu.DeviceGet(0)
		c, err := d.Primary()
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		probe.Run2(b, os.Stdout, c.MemGetAddressRange)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "3" {
		probe.Run3(b, os.Stdout)
		return
	}
	probe.Run(b, os.Stdout, len(os.Args) > 1)
}
