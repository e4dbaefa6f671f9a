package ipc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
)

// Ticket names descriptors that an exporting process holds, for an importer on the same
// machine that takes copies of them with pidfd_getfd (Linux 5.6+) instead of receiving them
// over a socket: the second transport, for where no socket can be set up between the two. A
// Ticket is a plain value that crosses any channel (a file, an environment variable, a
// Kubernetes annotation); its text form is one line (see MarshalText).
//
// Exported.Ticket and NewTicket make one; Fetch and FetchAndImport take the descriptors it
// names. The importer trusts none of it: see Fetch.
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
	// Header is the allocations' sizes, their granularity and handle type, as a socket
	// message has it.
	Header Header
	// Files are the descriptors, one per size of Header, in order.
	Files []TicketFile
}

// TicketFile is one descriptor a ticket names: its number in the exporter and the file it is
// open on there (fstat's device and inode), which the fetched copy must be open on too.
type TicketFile struct {
	FD       int
	Dev, Ino uint64
}

const (
	ticketPrefix = "cuvmm-pidfd-v1"
	// maxPID is PID_MAX_LIMIT, the largest pid Linux gives.
	maxPID = 1 << 22
	// maxTicketLen is the longest text form: the prefix, the fixed fields at their widest
	// (pid of 7 digits, uint64s of 20, a boot id of 36) and MaxDescriptors files of the widest
	// ":fd=FD/SIZE/DEV/INO" (a descriptor of 10 digits).
	maxTicketLen = len(ticketPrefix) + len(":pid=") + 7 + len(":start=") + 20 + len(":boot=") + 36 +
		len(":pidns=") + 20 + len(":gran=") + 20 + MaxDescriptors*(len(":fd=")+10+3+3*20)
)

// validate checks what any importer needs to hold, before any system call: a sane pid, a
// boot id and namespace, a valid header and one file for each of its sizes.
func (t Ticket) validate() error {
	if t.PID <= 0 || t.PID > maxPID {
		return fmt.Errorf("%w: pid %d (1 to %d)", ErrProtocol, t.PID, maxPID)
	}
	if !validBootID(t.Boot) {
		return fmt.Errorf("%w: boot id %q is not a lowercase UUID", ErrProtocol, t.Boot)
	}
	if t.PIDNS == 0 {
		return fmt.Errorf("%w: pid namespace 0", ErrProtocol)
	}
	if err := t.Header.validate(); err != nil {
		return err
	}
	if len(t.Files) != len(t.Header.Sizes) {
		return fmt.Errorf("%w: %d descriptors for %d sizes", ErrProtocol, len(t.Files), len(t.Header.Sizes))
	}
	for i, f := range t.Files {
		if f.FD < 0 || f.FD > 1<<31-1 {
			return fmt.Errorf("%w: descriptor %d of file %d", ErrProtocol, f.FD, i)
		}
	}
	return nil
}

// validBootID is whether s is a UUID as the kernel writes boot_id: 36 lowercase hex digits
// and dashes, 8-4-4-4-12.
func validBootID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// MarshalText encodes the ticket as one line of printable ASCII, fields in a fixed order:
//
//	cuvmm-pidfd-v1:pid=PID:start=START:boot=BOOT:pidns=PIDNS:gran=GRANULARITY:fd=FD/SIZE/DEV/INO...
//
// with one ":fd=" field per allocation, all numbers in decimal. It refuses a ticket that
// UnmarshalText would.
func (t Ticket) MarshalText() ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, opError("encode ticket", fmt.Sprintf("of process %d, %d descriptors", t.PID, len(t.Files)), err)
	}
	return []byte(t.encode()), nil
}

func (t Ticket) encode() string {
	var b strings.Builder
	b.WriteString(ticketPrefix)
	b.WriteString(":pid=" + strconv.Itoa(t.PID))
	b.WriteString(":start=" + strconv.FormatUint(t.Start, 10))
	b.WriteString(":boot=" + t.Boot)
	b.WriteString(":pidns=" + strconv.FormatUint(t.PIDNS, 10))
	b.WriteString(":gran=" + strconv.FormatUint(t.Header.Granularity, 10))
	for i, f := range t.Files {
		fmt.Fprintf(&b, ":fd=%d/%d/%d/%d", f.FD, t.Header.Sizes[i], f.Dev, f.Ino)
	}
	return b.String()
}

// String is the text form, or a description of what makes the ticket invalid.
func (t Ticket) String() string {
	if err := t.validate(); err != nil {
		return "invalid ticket: " + err.Error()
	}
	return t.encode()
}

// UnmarshalText decodes what MarshalText encoded, and nothing else: a ticket comes from
// another process and is not trusted. Any deviation from the form (a field out of order or
// repeated, a number with a sign or a leading zero, more than MaxDescriptors descriptors, a
// text longer than the longest ticket) matches ErrProtocol.
func (t *Ticket) UnmarshalText(text []byte) error {
	d, err := decodeTicket(text)
	if err != nil {
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

func decodeTicket(text []byte) (Ticket, error) {
	if len(text) > maxTicketLen {
		return Ticket{}, fmt.Errorf("%w: ticket of %d bytes, longer than any (%d)", ErrProtocol, len(text), maxTicketLen)
	}
	s, ok := strings.CutPrefix(string(text), ticketPrefix+":")
	if !ok {
		return Ticket{}, fmt.Errorf("%w: ticket does not start with %q", ErrProtocol, ticketPrefix+":")
	}
	fields := strings.Split(s, ":")
	if n := len(fields) - 5; n < 1 || n > MaxDescriptors {
		return Ticket{}, fmt.Errorf("%w: ticket of %d fields, want 5 and 1 to %d descriptors", ErrProtocol, len(fields), MaxDescriptors)
	}
	value := func(i int, key string) (string, error) {
		v, ok := strings.CutPrefix(fields[i], key+"=")
		if !ok {
			return "", fmt.Errorf("%w: ticket field %d is not %s=", ErrProtocol, i+1, key)
		}
		return v, nil
	}
	number := func(i int, key string) (uint64, error) {
		v, err := value(i, key)
		if err != nil {
			return 0, err
		}
		n, ok := decimal(v)
		if !ok {
			return 0, fmt.Errorf("%w: ticket's %s %q is not a decimal number", ErrProtocol, key, v)
		}
		return n, nil
	}
	var t Ticket
	pid, err := number(0, "pid")
	if err != nil {
		return Ticket{}, err
	}
	if pid > maxPID {
		return Ticket{}, fmt.Errorf("%w: pid %d (1 to %d)", ErrProtocol, pid, maxPID)
	}
	t.PID = int(pid)
	if t.Start, err = number(1, "start"); err != nil {
		return Ticket{}, err
	}
	if t.Boot, err = value(2, "boot"); err != nil {
		return Ticket{}, err
	}
	if t.PIDNS, err = number(3, "pidns"); err != nil {
		return Ticket{}, err
	}
	t.Header.HandleType = cu.MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	if t.Header.Granularity, err = number(4, "gran"); err != nil {
		return Ticket{}, err
	}
	files := fields[5:]
	t.Header.Sizes = make([]uint64, len(files))
	t.Files = make([]TicketFile, len(files))
	for i := range files {
		v, err := value(5+i, "fd")
		if err != nil {
			return Ticket{}, err
		}
		parts := strings.Split(v, "/")
		var n [4]uint64
		ok := len(parts) == 4
		for j := 0; ok && j < 4; j++ {
			n[j], ok = decimal(parts[j])
		}
		if !ok {
			return Ticket{}, fmt.Errorf("%w: ticket's descriptor %d %q is not FD/SIZE/DEV/INO in decimal", ErrProtocol, i, v)
		}
		if n[0] > 1<<31-1 {
			return Ticket{}, fmt.Errorf("%w: descriptor %d of file %d", ErrProtocol, n[0], i)
		}
		t.Files[i] = TicketFile{FD: int(n[0]), Dev: n[2], Ino: n[3]}
		t.Header.Sizes[i] = n[1]
	}
	if err := t.validate(); err != nil {
		return Ticket{}, err
	}
	return t, nil
}

// decimal parses a uint64 written as MarshalText writes one: digits only, no leading zero.
func decimal(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// clone is t with slices of its own.
func (t Ticket) clone() Ticket {
	t.Header.Sizes = slices.Clone(t.Header.Sizes)
	t.Files = slices.Clone(t.Files)
	return t
}

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
