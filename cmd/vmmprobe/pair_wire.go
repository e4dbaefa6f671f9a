package main

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
)

// The wire of vmmprobe pair, over one TCP connection. Every message is a frame: "VMPR", the
// version, the kind, the payload's length (big-endian uint16, at most maxPairPayload) and
// the payload. Each side first sends a hello (a random nonce). Then the importer proves it
// holds the shared secret (an HMAC of both nonces and its role), and only once that proof
// checked out does the exporter send its own: a peer that connects to an exporter without
// the secret gets a bare refusal and nothing it could test guesses of the secret against.
// Everything after the proofs is JSON sealed with AES-256-GCM under a key derived from the
// secret and both nonces, so a fabric handle, a capability, is neither handed to a peer
// that has not proved itself nor readable on the network.

const (
	pairVersion    = 1
	maxPairPayload = 8 << 10
	pairNonceSize  = 32
)

var pairMagic = [4]byte{'V', 'M', 'P', 'R'}

// Frame kinds.
const (
	kindHello  byte = 1 // nonce
	kindProof  byte = 2 // HMAC
	kindSealed byte = 3 // AES-GCM of a pairMsg
	kindRefuse byte = 4 // no payload: the peer's proof was wrong
)

// Roles, as the proofs bind them.
const (
	roleExporter = "exporter"
	roleImporter = "importer"
)

// errPairProtocol is what a frame that breaks the protocol is, whatever broke it.
var errPairProtocol = errors.New("not the vmmprobe pair protocol")

// errRefusedSecret is a proof that did not check out, ours (the peer refused) or theirs.
var errRefusedSecret = errors.New("the shared secret was refused")

func writeFrame(w io.Writer, kind byte, payload []byte) error {
	if len(payload) > maxPairPayload {
		return fmt.Errorf("pair: a message of %d bytes (at most %d)", len(payload), maxPairPayload)
	}
	b := make([]byte, 8, 8+len(payload))
	copy(b, pairMagic[:])
	b[4], b[5] = pairVersion, kind
	binary.BigEndian.PutUint16(b[6:], uint16(len(payload)))
	_, err := w.Write(append(b, payload...))
	return err
}

// readFrame reads one frame; a wrong magic, version or kind, or a length over the limit,
// is errPairProtocol before anything more is read.
func readFrame(r io.Reader) (kind byte, payload []byte, err error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[6:]))
	kind = h[5]
	if [4]byte(h[:4]) != pairMagic || h[4] != pairVersion || kind < kindHello || kind > kindRefuse || n > maxPairPayload {
		return 0, nil, fmt.Errorf("%w: header %x", errPairProtocol, h)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return kind, payload, nil
}

// expect reads a frame of kind want; a refusal in place of a proof, the one place a peer
// may refuse, is errRefusedSecret.
func expect(r io.Reader, want byte, size int) ([]byte, error) {
	kind, p, err := readFrame(r)
	switch {
	case err != nil:
		return nil, err
	case kind == kindRefuse && want == kindProof && len(p) == 0:
		return nil, fmt.Errorf("%w by the peer", errRefusedSecret)
	case kind != want || (size >= 0 && len(p) != size):
		return nil, fmt.Errorf("%w: a message of kind %d and %d bytes where kind %d was due", errPairProtocol, kind, len(p), want)
	}
	return p, nil
}

// pairSession is an authenticated connection: both sides proved the secret.
type pairSession struct {
	rw        io.ReadWriter
	aead      cipher.AEAD
	out, in   byte   // the first byte of the GCM nonces this side seals and opens with
	sent, got uint64 // sequence numbers of sealed messages, per direction
}

// handshake exchanges hellos and proofs over rw as role, the importer's proof first; it
// returns a session only when the peer proved the secret, and sends the peer a refusal
// when it did not.
func handshake(rw io.ReadWriter, secret []byte, role string) (*pairSession, error) {
	var mine [pairNonceSize]byte
	if _, err := rand.Read(mine[:]); err != nil {
		return nil, err
	}
	if err := writeFrame(rw, kindHello, mine[:]); err != nil {
		return nil, err
	}
	theirs, err := expect(rw, kindHello, pairNonceSize)
	if err != nil {
		return nil, err
	}
	exp, imp := mine[:], theirs
	if role == roleImporter {
		exp, imp = theirs, mine[:]
	}
	prove := func(who string) error { return writeFrame(rw, kindProof, pairMAC(secret, "proof "+who, exp, imp)) }
	check := func(who string) error {
		proof, err := expect(rw, kindProof, sha256.Size)
		if err != nil {
			return err
		}
		if !hmac.Equal(proof, pairMAC(secret, "proof "+who, exp, imp)) {
			_ = writeFrame(rw, kindRefuse, nil)
			return fmt.Errorf("%w: the peer's proof is wrong", errRefusedSecret)
		}
		return nil
	}
	s := &pairSession{rw: rw, out: 0, in: 1}
	if role == roleImporter {
		if err = prove(roleImporter); err == nil {
			err = check(roleExporter)
		}
		s.out, s.in = 1, 0
	} else if err = check(roleImporter); err == nil {
		err = prove(roleExporter)
	}
	var block cipher.Block
	if err == nil {
		block, err = aes.NewCipher(pairMAC(secret, "key", exp, imp))
	}
	if err == nil {
		s.aead, err = cipher.NewGCM(block)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// pairMAC is HMAC-SHA256(secret, "vmmprobe pair v1 " + label, exporter's nonce, importer's).
func pairMAC(secret []byte, label string, exp, imp []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("vmmprobe pair v1 " + label))
	m.Write(exp)
	m.Write(imp)
	return m.Sum(nil)
}

// nonce is the GCM nonce of message seq of the direction whose first byte is dir: each
// direction has its own space, so a message cannot be reflected back to its sender or
// replayed out of order.
func (s *pairSession) nonce(dir byte, seq uint64) []byte {
	n := make([]byte, s.aead.NonceSize())
	n[0] = dir
	binary.BigEndian.PutUint64(n[len(n)-8:], seq)
	return n
}

func (s *pairSession) send(m *pairMsg) error {
	plain, err := json.Marshal(m)
	if err != nil {
		return err
	}
	sealed := s.aead.Seal(nil, s.nonce(s.out, s.sent), plain, nil)
	s.sent++
	return writeFrame(s.rw, kindSealed, sealed)
}

func (s *pairSession) recv() (*pairMsg, error) {
	sealed, err := expect(s.rw, kindSealed, -1)
	if err != nil {
		return nil, err
	}
	plain, err := s.aead.Open(nil, s.nonce(s.in, s.got), sealed, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: a sealed message does not open", errPairProtocol)
	}
	s.got++
	return decodePairMsg(plain)
}

// decodePairMsg decodes a message strictly: unknown fields, trailing data and values out
// of range are errPairProtocol. (Field names match case-insensitively, as encoding/json
// matches them; only an authenticated peer reaches this decoder.)
func decodePairMsg(b []byte) (*pairMsg, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var m pairMsg
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", errPairProtocol, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the message", errPairProtocol)
	}
	if err := m.valid(); err != nil {
		return nil, fmt.Errorf("%w: %v", errPairProtocol, err)
	}
	return &m, nil
}

// pairMsg is every sealed message: the exporter's offer (Handle set, or Cause when it
// could not make one), the importer's result, and the exporter's verdict.
type pairMsg struct {
	Node   pairNode          `json:"node"`
	Handle string            `json:"handle,omitempty"` // ipc.FabricHandle's text form
	Seed   byte              `json:"seed,omitempty"`
	Cause  string            `json:"cause,omitempty"` // "" when the step succeeded
	Detail string            `json:"detail,omitempty"`
	Steps  map[string]uint32 `json:"steps_us,omitempty"`
}

// pairNode is what each side says of its node, for the verdict to name the cause.
type pairNode struct {
	Host    string `json:"host"`    // a hash of the boot id: same host or not
	Channel bool   `json:"channel"` // an IMEX channel this process can open
	Daemon  bool   `json:"daemon"`  // nvidia-imex runs (as far as this process sees)
	Clique  string `json:"clique,omitempty"`
}

func (m *pairMsg) valid() error {
	if len(m.Handle) > 256 || len(m.Detail) > 1024 || len(m.Cause) > 64 || len(m.Node.Host) > 64 || len(m.Node.Clique) > 64 || len(m.Steps) > 16 {
		return errors.New("a field over its limit")
	}
	// The peer's words reach this side's terminal: no line breaks or escape sequences.
	if strings.ContainsFunc(m.Detail+m.Node.Host+m.Node.Clique, unicode.IsControl) {
		return errors.New("a control character in a text field")
	}
	if m.Cause != "" && !knownCause(m.Cause) {
		return fmt.Errorf("unknown cause %q", m.Cause)
	}
	for k := range m.Steps {
		if !slices.Contains(pairSteps, k) {
			return fmt.Errorf("unknown step %q", k)
		}
	}
	return nil
}
