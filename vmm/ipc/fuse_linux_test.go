package ipc_test

import (
	"net"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/fusetest"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A peer's descriptor of a FUSE file whose server answers nothing, not even the FLUSH that
// each close(2) of it sends, holds up nothing: not a receive whose header is refused, nor
// one of a dma-buf, nor the Close of a Received that holds it, nor its import on sim.
func TestReceiveFUSEDescriptorDoesNotHang(t *testing.T) {
	fs := fusetest.Mount(t)
	fd := int(fs.Open(t, "file").Fd())
	fs.Stall(true)
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	m := vmm.New(s)
	dmaBuf, err := ipc.DmaBufHeader{Addr: 2 * mib, Size: 2 * mib, Chunks: 1}.MarshalBinary()
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		msg     []byte
		receive func(*net.UnixConn) error
		want    error
	}{
		{"refused header", patch(valid(), 0, 'X'), func(z *net.UnixConn) error {
			_, err := ipc.Receive(z)
			return err
		}, ipc.ErrProtocol},
		{"refused dma-buf", dmaBuf, func(z *net.UnixConn) error {
			_, err := ipc.ReceiveDmaBuf(z)
			return err
		}, ipc.ErrProtocol},
		{"received and closed", wire(2*mib, 2*mib), func(z *net.UnixConn) error {
			r, err := ipc.Receive(z)
			if err != nil {
				return err
			}
			return r.Close()
		}, nil},
		{"received and imported on sim", wire(2*mib, 2*mib), func(z *net.UnixConn) error {
			_, err := ipc.ReceiveAndImport(z, m, nil)
			return err
		}, cu.ERROR_UNKNOWN},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, z := socketpair(t, unix.SOCK_SEQPACKET)
			defer a.Close()
			defer z.Close()
			require.NoError(t, rawSend(a, c.msg, unix.UnixRights(fd)))
			done := make(chan error, 1)
			go func() { done <- c.receive(z) }()
			select {
			case err := <-done:
				if c.want == nil {
					require.NoError(t, err)
				}
				require.ErrorIs(t, err, c.want)
			case <-time.After(5 * time.Second):
				t.Fatal("still waiting on the FUSE file after 5 s")
			}
		})
	}
}
