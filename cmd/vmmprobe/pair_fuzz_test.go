package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// peerStream is a connection whose peer sends b and swallows what it is sent.
type peerStream struct{ r io.Reader }

func (p peerStream) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p peerStream) Write(b []byte) (int, error) { return len(b), nil }

// FuzzPairWire feeds a peer's bytes to both sides' handshake and to the message decoder:
// neither panics, hangs or accepts what it must not; a peer that does not hold the secret
// never gets a session, whatever it sends.
func FuzzPairWire(f *testing.F) {
	var hello bytes.Buffer
	_ = writeFrame(&hello, kindHello, make([]byte, pairNonceSize))
	_ = writeFrame(&hello, kindProof, make([]byte, 32))
	f.Add(hello.Bytes())
	f.Add([]byte("VMPR\x01\x04\x00\x00"))
	f.Add([]byte("VMPR\x01\x01\xff\xff"))
	f.Add([]byte(`{"node":{"host":"h","channel":true,"daemon":false},"handle":"cuvmm-fabric-v1:2097152:AAAA","seed":3,"steps_us":{"import":12}}`))
	f.Add([]byte(`{"node":{},"cause":"no-such-cause"}`))
	f.Add([]byte(`{"node":{"clique":"a\u001b[2J"},"detail":"x\nok"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, role := range []string{roleExporter, roleImporter} {
			s, err := handshake(peerStream{bytes.NewReader(b)}, []byte(testSecret), role)
			require.Error(t, err, "a session without the secret")
			require.Nil(t, s)
		}
		r := bytes.NewReader(b)
		for {
			kind, p, err := readFrame(r)
			if err != nil {
				require.True(t, errors.Is(err, errPairProtocol) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
				break
			}
			require.LessOrEqual(t, len(p), maxPairPayload)
			require.True(t, kind >= kindHello && kind <= kindRefuse)
		}
		m, err := decodePairMsg(b)
		if err != nil {
			require.ErrorIs(t, err, errPairProtocol)
			return
		}
		require.NoError(t, m.valid())
		require.True(t, m.Cause == "" || knownCause(m.Cause))
		require.False(t, strings.ContainsFunc(m.Detail+m.Node.Host+m.Node.Clique, unicode.IsControl), "a peer's text with control characters")
	})
}
