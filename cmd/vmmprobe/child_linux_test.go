package main

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pair is a SOCK_SEQPACKET socket pair as the parent and the child use.
func pair(t *testing.T) (parent, child *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	parent, err = unixConn(fds[0], "parent")
	require.NoError(t, err)
	child, err = unixConn(fds[1], "child")
	require.NoError(t, err)
	t.Cleanup(func() { parent.Close(); child.Close() })
	return parent, child
}

// exchange sends one raw request (and a descriptor message when exp is set) to a serving
// child and returns its answer.
func exchange(t *testing.T, parent *net.UnixConn, raw []byte, exp *ipc.Exported) childError {
	t.Helper()
	_, err := parent.Write(raw)
	require.NoError(t, err)
	if exp != nil {
		require.NoError(t, ipc.Send(parent, exp))
	}
	buf := make([]byte, maxChildMessage)
	n, err := parent.Read(buf)
	require.NoError(t, err)
	var r childError
	require.NoError(t, json.Unmarshal(buf[:n], &r), "%q", buf[:n])
	return r
}

// TestChildServesHostileRequests: what the parent sends is checked before it is used; a
// request that makes no sense is answered with why, and the next one is still served.
func TestChildServesHostileRequests(t *testing.T) {
	parent, child := pair(t)
	done := make(chan error, 1)
	go func() { done <- serveChild(child, "sim:mnnvl", backend.Opener{}) }()

	r := exchange(t, parent, []byte("{not json"), nil)
	assert.Equal(t, "request", r.Step)
	r = exchange(t, parent, []byte(`{"kind":"teleport","size":2097152}`), nil)
	assert.Equal(t, "request", r.Step)
	assert.Contains(t, r.Msg, `unknown kind "teleport"`)
	r = exchange(t, parent, []byte(`{"kind":"fabric","fabric":"cuvmm-fabric-v1:2097152:AAAA"}`), nil)
	assert.Equal(t, "import", r.Step, "a handle that is not one: %+v", r)

	// A real export, with a size claim that is not the allocation's: refused, nothing read.
	s := newSim(t, "mnnvl")
	m := vmm.New(s)
	p := vmm.DeviceProps(0)
	p.HandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	a, err := m.Create(2<<20, p)
	require.NoError(t, err)
	defer a.Close()
	exp, err := ipc.Export(m, a)
	require.NoError(t, err)
	defer exp.Close()
	req, _ := json.Marshal(childRequest{Kind: kindPosixFD, Device: 0, Size: 4 << 20, Seed: 1})
	r = exchange(t, parent, req, exp)
	assert.Equal(t, "import", r.Step, "%+v", r)

	// The right claim: the child reads zeros where it expects the pattern.
	req, _ = json.Marshal(childRequest{Kind: kindPosixFD, Device: 0, Size: 2 << 20, Seed: 1})
	r = exchange(t, parent, req, exp)
	assert.Equal(t, "data check", r.Step, "%+v", r)

	parent.Close()
	require.NoError(t, <-done, "the child ends when the parent closes its end")
}

// TestChildThatCannotOpenItsBackend drains the descriptor it was sent and says why.
func TestChildThatCannotOpenItsBackend(t *testing.T) {
	parent, child := pair(t)
	done := make(chan error, 1)
	go func() { done <- serveChild(child, "sim:no-such-preset", backend.Opener{}) }()
	s := newSim(t, "h100")
	m := vmm.New(s)
	p := vmm.DeviceProps(0)
	p.HandleTypes = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	a, err := m.Create(2<<20, p)
	require.NoError(t, err)
	defer a.Close()
	exp, err := ipc.Export(m, a)
	require.NoError(t, err)
	defer exp.Close()
	req, _ := json.Marshal(childRequest{Kind: kindPosixFD, Size: 2 << 20})
	r := exchange(t, parent, req, exp)
	assert.Equal(t, "open backend", r.Step)
	assert.Contains(t, r.Msg, "no-such-preset")
	assert.Error(t, <-done)
}

// TestParentRefusesAGarbledReply: a reply that is not a child's answer ends the child
// and is reported as the exchange failing, never trusted.
func TestParentRefusesAGarbledReply(t *testing.T) {
	parent, child := pair(t)
	done := make(chan error, 1)
	close(done)
	c := &ipcChild{conn: parent, stderr: &limitedBuffer{max: 16}, done: done}
	go func() {
		buf := make([]byte, maxChildMessage)
		if _, err := child.Read(buf); err == nil {
			_, _ = child.Write([]byte(`{"unexpected": true}`))
		}
	}()
	err := c.run(childRequest{Kind: kindFabric, Size: 2 << 20}, nil)
	var ce *childError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "exchange", ce.Step)
	assert.Contains(t, ce.Msg, "is not a child's answer")
	assert.Nil(t, c.conn, "the child was ended")
}
