package sim_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
)

// FuzzFabricToken imports 64 bytes as a fabric handle, as a peer sends them (sim's tokens
// travel in ipc.FabricHandle's text and binary forms): only a real token imports, and
// nothing else is opened, grown or written; the importer stays clean.
//
//	go test -run '^$' -fuzz '^FuzzFabricToken$' ./sim/
func FuzzFabricToken(f *testing.F) {
	// What the tokens are forged against: a Sim holding one fabric allocation and, on Linux
	// (where a token names a descriptor of a process), a file that must never be touched,
	// open read-only as a victim process would hold it.
	ex, err := sim.New(sim.PresetMNNVL())
	require.NoError(f, err)
	h, err := ex.Create(2*mib, devProp(0, cu.MEM_HANDLE_TYPE_FABRIC), 0)
	require.NoError(f, err)
	f.Cleanup(func() { ex.Release(h) })
	var e struct {
		tok    cu.MemFabricHandle
		victim string
		ro     *os.File
	}
	e.tok, err = ex.ExportFabric(h)
	require.NoError(f, err)
	f.Add(e.tok[:])
	if runtime.GOOS == "linux" {
		e.victim = filepath.Join(f.TempDir(), "victim")
		require.NoError(f, os.WriteFile(e.victim, []byte("do not touch"), 0o600))
		e.ro, err = os.Open(e.victim)
		require.NoError(f, err)
		f.Cleanup(func() { e.ro.Close() })
	}
	forge := func(pid, fd uint32, secret byte) []byte {
		tok := e.tok
		if secret != 0 {
			for i := 16; i < 48; i++ {
				tok[i] = secret
			}
		}
		binary.LittleEndian.PutUint32(tok[48:], pid)
		binary.LittleEndian.PutUint32(tok[52:], fd)
		return tok[:]
	}
	pid := uint32(os.Getpid())
	if e.ro != nil {
		f.Add(forge(pid, uint32(e.ro.Fd()), 0))
	}
	f.Add(forge(pid, binary.LittleEndian.Uint32(e.tok[52:]), 0x5a))
	f.Add(forge(1, 0, 0))
	f.Add(make([]byte, 64))
	f.Add([]byte("cuvmm-sim-fabric"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tok cu.MemFabricHandle
		copy(tok[:], b)
		s, err := sim.New(sim.PresetMNNVL())
		require.NoError(t, err)
		h, err := s.ImportFabric(tok)
		switch {
		case [60]byte(tok[:60]) == [60]byte(e.tok[:60]):
			require.NoError(t, err, "the exporter's token (its last 4 bytes are ignored, as the driver ignores at least the last)")
		case err == nil:
			// Fuzzing runs this in worker processes, each with its own exporter, and their
			// seeds carry the coordinator's token: a real token of another process.
			require.True(t, genuine(tok), "%x imports, and is no exporter's token", tok)
		default:
			require.ErrorIs(t, err, cu.ERROR_NOT_SUPPORTED, "a token the exporter did not make")
			require.Contains(t, err.Error(), "cuMemImportFromShareableHandle")
		}
		if err == nil {
			require.NoError(t, s.Release(h))
		}
		require.True(t, s.Stats().Clean(), "%+v", s.Stats())
		if e.victim != "" {
			got, err := os.ReadFile(e.victim)
			require.NoError(t, err)
			require.Equal(t, "do not touch", string(got), "the victim's file")
		}
	})
}

// genuine reports whether tok is a token some Sim made: the file it leads to bears its
// device and its secret's SHA-256 in its name (a memfd of the token's process on Linux, a
// file under the temporary directory elsewhere).
func genuine(tok cu.MemFabricHandle) bool {
	le := binary.LittleEndian
	sum := sha256.Sum256(tok[16:48])
	name := fmt.Sprintf("cuvmm-sim.f%d.%s", le.Uint32(tok[56:]), hex.EncodeToString(sum[:]))
	if runtime.GOOS != "linux" {
		_, err := os.Stat(filepath.Join(os.TempDir(), name))
		return err == nil
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", le.Uint32(tok[48:]), le.Uint32(tok[52:])))
	return err == nil && strings.TrimSuffix(link, " (deleted)") == "/memfd:"+name
}
