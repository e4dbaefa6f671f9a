package vmmtest

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func closeDescriptor(fd int) { unix.Close(fd) }

// descriptorSize is what lseek to the end of fd says: a dma-buf's size.
func descriptorSize(fd int) (int64, error) { return unix.Seek(fd, 0, unix.SEEK_END) }

// dmaBufDescriptors lists the open descriptors that are dma-bufs: the kernel's ("/dmabuf:",
// "anon_inode:dmabuf" on older kernels) and sim's (a memfd named "cuvmm-sim.dmabuf:...").
// Only they are counted: a driver may open descriptors of its own on first use.
func dmaBufDescriptors(t *testing.T) []string {
	ents, err := os.ReadDir("/proc/self/fd")
	noError(t, err)
	var out []string
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && strings.Contains(l, "dmabuf") {
			out = append(out, e.Name()+"->"+l)
		}
	}
	return out
}
