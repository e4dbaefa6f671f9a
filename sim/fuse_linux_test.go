package sim_test

import (
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/fusetest"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
)

// A FUSE file whose server answers nothing, not even FLUSH, is refused as the driver
// refuses a descriptor that is not an allocation, without waiting on the server (which sim
// would do holding its lock).
func TestImportFUSEFile(t *testing.T) {
	fs := fusetest.Mount(t)
	f := fs.Open(t, "file")
	fs.Stall(true)
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := s.ImportFD(int(f.Fd()))
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, cu.ERROR_UNKNOWN)
		require.ErrorContains(t, err, "not an exported allocation")
	case <-time.After(10 * time.Second):
		t.Fatal("ImportFD still waiting on the FUSE file after 10 s")
	}
	require.True(t, s.Stats().Clean())
}
