package sim_test

import (
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/fusetest"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A FUSE file whose server answers nothing, not even FLUSH, is refused as the driver
// refuses a descriptor that is not an allocation, without waiting on the server (which sim
// would do holding its lock): opened for reading, or only as a path (O_PATH), which
// F_GET_SEALS refuses as it refuses a closed descriptor.
func TestImportFUSEFile(t *testing.T) {
	fs := fusetest.Mount(t)
	f := fs.Open(t, "file")
	path, err := unix.Open(fs.Dir+"/file", unix.O_PATH|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(path)
	fs.Stall(true)
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	for _, fd := range []int{int(f.Fd()), path} {
		done := make(chan error, 1)
		go func() {
			_, err := s.ImportFD(fd)
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, cu.ERROR_UNKNOWN)
			require.ErrorContains(t, err, "not an exported allocation")
		case <-time.After(10 * time.Second):
			t.Fatalf("ImportFD of descriptor %d still waiting on the FUSE file after 10 s", fd)
		}
	}
	require.True(t, s.Stats().Clean())
}
