// Package pidfd shares device memory between the processes of one machine without a socket
// between them: the exporter publishes a Ticket, one line of text that travels by any
// channel (a file, an environment variable, a Kubernetes annotation), and the importer takes
// copies of the exported descriptors with pidfd_open and pidfd_getfd (Linux 5.6+) and imports
// them as it would descriptors received over a socket (package ipc).
//
// A ticket is a capability, like the descriptors it grants. It names the exporter and its
// manifest, a sealed memory file that the exporter maps, listing exactly the descriptors of
// this export, and carries the manifest's random secret: the importer takes only what a
// manifest with that secret lists, so a ticket that merely names a process and descriptor
// numbers reaches nothing (the NVIDIA driver opens every exported descriptor on the same
// file, so which file a descriptor is open on tells nothing). Fetch says what else it
// checks; its refusals say which check failed, never what would have passed it. Import then
// checks the sizes, the driver the memory. SECURITY.md says what a ticket proves.
//
// pidfd_getfd needs ptrace access to the exporter: the same user, and, under Yama's
// kernel.yama.ptrace_scope 1, the importer an ancestor of the exporter or named by it
// (AllowImporter, or AllowAnyImporter), or CAP_SYS_PTRACE. The errors say which rule
// refused and the remedy.
//
// Errors are *vmm.Error values (package "pidfd"); a ticket or manifest that cannot be true
// matches ipc.ErrProtocol.
package pidfd

import (
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
)

// errProtocol is ipc.ErrProtocol, which a ticket or manifest that cannot be true matches.
var errProtocol = ipc.ErrProtocol

// opError is the error of a failed operation of this package; nil when err is nil.
func opError(op, args string, err error) error {
	if err == nil {
		return nil
	}
	return &vmm.Error{Pkg: "pidfd", Op: op, Args: args, Err: err}
}

// Ticket lets an importer on the same machine take an exporter's descriptors with
// pidfd_getfd instead of receiving them over a socket. It is a plain value whose text form
// is one line (see MarshalText).
//
// A ticket is a capability: whoever holds it can map the exported memory, so hand it only
// to the importer it is meant for. Only its secret, the manifest's, is secret; String does
// not show it, MarshalText does. Publish makes one; Fetch and FetchAndImport take what it
// grants.
type Ticket struct {
	// PID is the exporter's process id, in its pid namespace.
	PID int
	// Start is the exporter's start time, in clock ticks after boot (field 22 of
	// /proc/PID/stat): a pid reused by another process since the ticket was made is noticed.
	Start uint64
	// Boot is the exporter's boot id (/proc/sys/kernel/random/boot_id): a ticket of another
	// machine, or of before a reboot, is noticed.
	Boot string
	// PIDNS is the inode of the exporter's pid namespace (/proc/self/ns/pid): the importer
	// must share it, or PID names another process there.
	PIDNS uint64
	// Manifest is the number of the exporter's descriptor of the manifest.
	Manifest int

	secret [secretLen]byte
}

const (
	ticketPrefix   = "cuvmm-pidfd-v2:"
	ticketPrefixV1 = "cuvmm-pidfd-v1:"
	secretLen      = 32
	// maxPID is PID_MAX_LIMIT, the largest pid Linux gives.
	maxPID = 1 << 22
	// maxTicketLen is the longest text form: the fixed fields at their widest (a pid of 7
	// digits, uint64s of 20, a boot id of 36, a descriptor of 10) and the secret in hex.
	maxTicketLen = len(ticketPrefix) + len("pid=") + 7 + len(":start=") + 20 + len(":boot=") + 36 +
		len(":pidns=") + 20 + len(":manifest=") + 10 + len(":secret=") + 2*secretLen
)

// validate checks what any importer needs to hold, before any system call: a sane pid, a
// boot id and namespace, a descriptor number.
func (t Ticket) validate() error {
	if t.PID <= 0 || t.PID > maxPID {
		return fmt.Errorf("%w: pid %d (1 to %d)", errProtocol, t.PID, maxPID)
	}
	if !validBootID(t.Boot) {
		return fmt.Errorf("%w: boot id %q is not a lowercase UUID", errProtocol, t.Boot)
	}
	if t.PIDNS == 0 {
		return fmt.Errorf("%w: pid namespace 0", errProtocol)
	}
	if t.Manifest < 0 || t.Manifest > 1<<31-1 {
		return fmt.Errorf("%w: manifest descriptor %d", errProtocol, t.Manifest)
	}
	return nil
}

// validBootID is whether s is a UUID as the kernel writes boot_id: 36 lowercase hex digits
// and dashes, 8-4-4-4-12.
func validBootID(s string) bool {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	return err == nil && len(b) == 16 && fmt.Sprintf("%x-%x-%x-%x-%x", b[:4], b[4:6], b[6:8], b[8:10], b[10:]) == s
}

// MarshalText encodes the ticket, its secret included, as one line of printable ASCII,
// fields in a fixed order, numbers in decimal and the secret in lowercase hex:
//
//	cuvmm-pidfd-v2:pid=PID:start=START:boot=BOOT:pidns=PIDNS:manifest=FD:secret=SECRET
//
// It refuses a ticket that UnmarshalText would.
func (t Ticket) MarshalText() ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, opError("encode ticket", "of process "+strconv.Itoa(t.PID), err)
	}
	return []byte(t.encode(hex.EncodeToString(t.secret[:]))), nil
}

func (t Ticket) encode(secret string) string {
	return ticketPrefix + "pid=" + strconv.Itoa(t.PID) +
		":start=" + strconv.FormatUint(t.Start, 10) +
		":boot=" + t.Boot +
		":pidns=" + strconv.FormatUint(t.PIDNS, 10) +
		":manifest=" + strconv.Itoa(t.Manifest) +
		":secret=" + secret
}

// String is the text form with the secret left out, for logs; or a description of what
// makes the ticket invalid.
func (t Ticket) String() string {
	if err := t.validate(); err != nil {
		return "invalid ticket: " + err.Error()
	}
	return t.encode("REDACTED")
}

// GoString is String: %#v does not show the secret either.
func (t Ticket) GoString() string { return t.String() }

// UnmarshalText decodes what MarshalText encoded, and nothing else: a ticket comes from
// another process and is not trusted. Any deviation from the form (a field out of order or
// repeated, a number with a sign or a leading zero, a secret not of 64 lowercase hex
// digits, a text longer than the longest ticket) matches errProtocol, and so does a ticket
// of version 1, which proved nothing and is no longer accepted.
func (t *Ticket) UnmarshalText(text []byte) error {
	fail := func(format string, args ...any) error {
		err := fmt.Errorf("%w: "+format, append([]any{errProtocol}, args...)...)
		return opError("decode ticket", fmt.Sprintf("text of %d bytes", len(text)), err)
	}
	if strings.HasPrefix(string(text), ticketPrefixV1) {
		return fail("a version 1 ticket, no longer accepted: it named descriptors without proving that the exporter " +
			"meant them for this ticket; the exporter must make a new one with this version of cuvmm")
	}
	if len(text) > maxTicketLen {
		return fail("ticket of %d bytes, longer than any (%d)", len(text), maxTicketLen)
	}
	s, ok := strings.CutPrefix(string(text), ticketPrefix)
	if !ok {
		return fail("ticket does not start with %q", ticketPrefix)
	}
	keys := []string{"pid", "start", "boot", "pidns", "manifest", "secret"}
	fields := strings.Split(s, ":")
	if len(fields) != len(keys) {
		return fail("ticket of %d fields, want %d", len(fields), len(keys))
	}
	vals := make([]string, len(keys))
	for i, key := range keys {
		v, ok := strings.CutPrefix(fields[i], key+"=")
		if !ok {
			return fail("ticket field %d is not %s=", i+1, key)
		}
		vals[i] = v
	}
	var n [5]uint64
	for _, i := range []int{0, 1, 3, 4} {
		var ok bool
		if n[i], ok = decimal(vals[i]); !ok {
			return fail("ticket's %s %q is not a decimal number", keys[i], vals[i])
		}
	}
	// Checked before the conversions to int, which could truncate them.
	if n[0] > maxPID {
		return fail("pid %d (1 to %d)", n[0], maxPID)
	}
	if n[4] > 1<<31-1 {
		return fail("manifest descriptor %d", n[4])
	}
	d := Ticket{PID: int(n[0]), Start: n[1], Boot: vals[2], PIDNS: n[3], Manifest: int(n[4])}
	sec := vals[5]
	if len(sec) != 2*secretLen || strings.ToLower(sec) != sec {
		return fail("the ticket's secret is not %d lowercase hex digits", 2*secretLen)
	}
	if _, err := hex.Decode(d.secret[:], []byte(sec)); err != nil {
		return fail("the ticket's secret is not %d lowercase hex digits", 2*secretLen)
	}
	if err := d.validate(); err != nil {
		return opError("decode ticket", fmt.Sprintf("text of %d bytes", len(text)), err)
	}
	*t = d
	return nil
}

// ParseTicket decodes a ticket's text form (an environment variable's value, say), as
// UnmarshalText does.
func ParseTicket(s string) (Ticket, error) {
	var t Ticket
	err := t.UnmarshalText([]byte(s))
	return t, err
}

// decimal parses a uint64 written as MarshalText writes one: digits only, no leading zero.
func decimal(s string) (uint64, bool) {
	// ParseUint takes no sign, but takes leading zeros: the one spelling is FormatUint's.
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && strconv.FormatUint(n, 10) == s
}

// manifest is what a ticket grants: the header of the export and, for each allocation, the
// exporter's descriptor and the file it is open on (fstat's device and inode). The
// exporter writes it into a memory file it seals, so that nothing can change it; the
// importer reads it from its copy of that file.
type manifest struct {
	secret [secretLen]byte
	header ipc.Header
	files  []manifestFile
}

type manifestFile struct {
	fd       int
	dev, ino uint64
}

// The manifest's layout, little-endian: magic 8, version 2, reserved 2, count 4, secret 32,
// the header as a socket message has it (32 + 8 per allocation), then per allocation the
// descriptor 4, reserved 4, device 8, inode 8.
const (
	manifestMagic   = "CUVMMTKT"
	manifestVersion = 2
	manifestFixed   = 16 + secretLen
	manifestEntry   = 24
	headerFixed     = 32 // of ipc.Header.MarshalBinary's message, before the sizes
	maxManifestLen  = manifestFixed + headerFixed + (8+manifestEntry)*ipc.MaxDescriptors
)

func (m manifest) encode() ([]byte, error) {
	h, err := m.header.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if len(m.files) != len(m.header.Sizes) {
		return nil, fmt.Errorf("%w: %d descriptors for %d sizes", vmm.ErrInvalid, len(m.files), len(m.header.Sizes))
	}
	le := binary.LittleEndian
	b := make([]byte, manifestFixed, manifestFixed+len(h)+manifestEntry*len(m.files))
	copy(b, manifestMagic)
	le.PutUint16(b[8:], manifestVersion)
	le.PutUint32(b[12:], uint32(len(m.files)))
	copy(b[16:], m.secret[:])
	b = append(b, h...)
	for _, f := range m.files {
		if f.fd < 0 || f.fd > 1<<31-1 {
			return nil, fmt.Errorf("%w: descriptor %d", vmm.ErrInvalid, f.fd)
		}
		b = le.AppendUint32(b, uint32(f.fd))
		b = le.AppendUint32(b, 0)
		b = le.AppendUint64(b, f.dev)
		b = le.AppendUint64(b, f.ino)
	}
	return b, nil
}

// decodeManifest reads a manifest that came from another process, and checks its secret
// against want (in constant time) before it reads anything past it. Errors say which check
// failed, not what would have passed it.
func decodeManifest(b []byte, want *[secretLen]byte) (manifest, error) {
	le := binary.LittleEndian
	if len(b) < manifestFixed || string(b[:8]) != manifestMagic {
		return manifest{}, fmt.Errorf("%w: not a ticket's manifest", errProtocol)
	}
	if v := le.Uint16(b[8:]); v != manifestVersion {
		return manifest{}, fmt.Errorf("%w: manifest version %d, want %d", errProtocol, v, manifestVersion)
	}
	var m manifest
	copy(m.secret[:], b[16:manifestFixed])
	if subtle.ConstantTimeCompare(m.secret[:], want[:]) != 1 {
		return manifest{}, fmt.Errorf("%w: the ticket's secret is not the manifest's", errProtocol)
	}
	if le.Uint16(b[10:]) != 0 {
		return manifest{}, fmt.Errorf("%w: manifest's reserved bytes are not 0", errProtocol)
	}
	n := le.Uint32(b[12:])
	if n == 0 || n > ipc.MaxDescriptors {
		return manifest{}, fmt.Errorf("%w: manifest of %d descriptors (1 to %d)", errProtocol, n, ipc.MaxDescriptors)
	}
	hlen := headerFixed + 8*int(n)
	if len(b) != manifestFixed+hlen+manifestEntry*int(n) {
		return manifest{}, fmt.Errorf("%w: manifest of %d bytes for %d descriptors", errProtocol, len(b), n)
	}
	if err := m.header.UnmarshalBinary(b[manifestFixed : manifestFixed+hlen]); err != nil {
		return manifest{}, err
	}
	if len(m.header.Sizes) != int(n) {
		return manifest{}, fmt.Errorf("%w: manifest of %d descriptors with a header of %d", errProtocol, n, len(m.header.Sizes))
	}
	for e := b[manifestFixed+hlen:]; len(e) > 0; e = e[manifestEntry:] {
		fd := le.Uint32(e)
		if fd > 1<<31-1 || le.Uint32(e[4:]) != 0 {
			return manifest{}, fmt.Errorf("%w: manifest entry %d is not a descriptor", errProtocol, len(m.files))
		}
		m.files = append(m.files, manifestFile{fd: int(fd), dev: le.Uint64(e[8:]), ino: le.Uint64(e[16:])})
	}
	return m, nil
}

// FetchOption adjusts Fetch and FetchAndImport.
type FetchOption func(*fetchOpts)

type fetchOpts struct {
	self bool
}

// AllowSelf lets Fetch take a ticket that names this very process. Without it such a
// ticket is refused: a peer that hands this process a ticket naming this process would
// otherwise have it import memory of its own (the ticket's secret still has to match one of
// this process's manifests, so this is a second wall, not the first).
func AllowSelf() FetchOption { return func(o *fetchOpts) { o.self = true } }

// refusal is the system's refusal of a transport, said in words with what to do about it.
// It unwraps to the system's error (an errno, with its own matches: os.ErrPermission for
// EPERM and EACCES) and also matches each of is.
type refusal struct {
	what   string // what was refused
	err    error  // the system's error, or nil
	remedy string // what to do about it, or ""
	is     []error
}

func (r *refusal) Error() string {
	s := r.what
	if r.err != nil {
		s += " (" + r.err.Error() + ")"
	}
	if r.remedy != "" {
		s += ": " + r.remedy
	}
	return s
}

func (r *refusal) Unwrap() error { return r.err }

func (r *refusal) Is(target error) bool { return slices.Contains(r.is, target) }
