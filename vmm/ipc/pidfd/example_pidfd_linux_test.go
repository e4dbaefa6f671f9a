package pidfd_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/cuvmm/cuvmm/vmm/ipc/pidfd"
)

// Without a socket between them: the exporter publishes a ticket (here in an environment
// variable; a file or a Kubernetes annotation carry it as well), and the importer takes
// copies of the descriptors it grants with pidfd_getfd. Here both ends are one process.
func ExampleFetchAndImport() {
	s, _ := sim.New(sim.PresetH100())
	m := vmm.New(s)
	a, err := m.Create(2<<20, vmm.Props{Location: vmm.OnDevice(0), HandleTypes: cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR})
	if err != nil {
		panic(err)
	}
	defer a.Close()

	// The exporter keeps its descriptors open until the importer has fetched them. Where
	// kernel.yama.ptrace_scope is 1 and the importer is not its ancestor, it names the
	// importer first: pidfd.AllowImporter(importerPID).
	e, err := ipc.Export(m, a)
	if err != nil {
		panic(err)
	}
	defer e.Close()
	t, err := pidfd.Publish(e)
	if err != nil {
		panic(err)
	}
	// The text form carries the secret that grants the memory (String leaves it out):
	// hand it only to the importer.
	text, err := t.MarshalText() // cuvmm-pidfd-v2:pid=…:manifest=…:secret=…
	if err != nil {
		panic(err)
	}
	os.Setenv("SHARED_MEMORY", string(text))
	defer os.Unsetenv("SHARED_MEMORY")

	// The importer. A ticket naming the importer's own process is refused unless it says
	// that it expects one, as here.
	ticket, err := pidfd.ParseTicket(os.Getenv("SHARED_MEMORY"))
	if err != nil {
		panic(err)
	}
	imp, err := pidfd.FetchAndImport(ticket, m, []int{0}, pidfd.AllowSelf())
	if errors.Is(err, ipc.ErrUnsupported) || errors.Is(err, os.ErrPermission) {
		// The error says what the system refused and the remedy; the socket transport
		// (Send, ReceiveAndImport) remains.
		fmt.Println(err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer imp.Close()
	_, _ = imp.WriteAt([]byte("shared"), 0)
	fmt.Println("imported", imp.Size()>>20, "MiB by pidfd_getfd")
	// Output:
	// imported 2 MiB by pidfd_getfd
}
