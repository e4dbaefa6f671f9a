package pidfd

import (
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/internal/fusetest"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A FUSE file whose server no longer answers, found at the manifest's number when Fetch
// takes it again, is refused without asking its file system.
func TestFetchManifestReplacedByFUSEFile(t *testing.T) {
	fs := fusetest.Mount(t)
	f := fs.Open(t, "manifest")
	// Withdrawn first: it closes the manifest's number, the FUSE file by then, whose FLUSH
	// the server answers.
	tk := devnullTicket(t)
	fs.Stall(false)
	getfd := pidfdGetfd
	t.Cleanup(func() { pidfdGetfd = getfd })
	takes := 0
	var dupErr error
	pidfdGetfd = func(pidfd, fd, flags int) (int, error) {
		if fd == tk.Manifest {
			if takes++; takes == 2 {
				dupErr = unix.Dup2(int(f.Fd()), tk.Manifest)
			}
		}
		return getfd(pidfd, fd, flags)
	}
	before := countFDs(t)
	done := make(chan error, 1)
	go func() {
		r, err := Fetch(tk, AllowSelf())
		if r != nil {
			r.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ipc.ErrProtocol)
		require.ErrorContains(t, err, "the exporter withdrew the ticket while its descriptors were taken")
	case <-time.After(10 * time.Second):
		t.Fatal("Fetch still waiting on the FUSE file after 10 s")
	}
	require.NoError(t, dupErr)
	require.Equal(t, 2, takes)
	requireOpenFDs(t, before, "the descriptors fetched are closed")
}
