// Command ipc shares device memory between two processes: the parent grows a buffer of
// exportable memory, exports its chunks as file descriptors and sends them over a Unix
// socket (SCM_RIGHTS); the child (this program, started again) imports and maps them,
// checks every byte and writes a reply that the parent then reads through its own mapping.
// Both count their open descriptors to show that none leaked.
//
//	go run ./examples/ipc [--backend=auto|cuda|sim] [--preset NAME]
//
// Descriptor passing needs Linux; elsewhere it says so and exits 0. It exits 0 when
// everything verified, 1 when something did not, 2 on a usage error and 3 when
// --backend=cuda finds no driver.
package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/cuvmm/cuvmm/examples/internal/run"
)

func main() { run.Main(realMain) }

const (
	mib       = 1 << 20
	seed      = 42
	replySeed = 43
)

func realMain(args []string, stdout, stderr io.Writer) int {
	var child bool
	f, code, ok := run.Parse("ipc", args, "h100", stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&child, "child", false, "run as the importing child (internal: the socket is descriptor 3)")
	})
	if !ok {
		return code
	}
	if child {
		return childMain(f, stdout, stderr)
	}
	be, code, err := run.Open("ipc", f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ipc:", err)
		return code
	}
	r := &run.Report{W: stdout}
	fmt.Fprintf(stdout, "ipc: backend %s\n", be.Name())
	parent(r, be, f)
	return r.Exit()
}
