package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/internal/units"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/cuvmm/cuvmm/vmm/ipc"
)

// vmmprobe pair: one process (--listen) creates fabric memory on its device, fills it and
// exports its handle; the other (--connect) imports it, maps it, checks the bytes and
// writes its own, which the exporter reads back. Both must hold the same secret, and
// every step ends by the deadline. The verdict names the cause of a failure.

// envPairSecret holds the shared secret when --secret-file is not given (never a flag: a
// command line is visible to every user of the node).
const envPairSecret = "VMMPROBE_PAIR_SECRET"

const (
	minPairSecret  = 16
	maxPairSecret  = 4096
	defaultTimeout = 10 * time.Second
	// handshakeTimeout bounds the exporter's handshake with one connection: the importer
	// speaks at once, and a connection that says nothing must not keep the exporter from
	// the importer waiting behind it.
	handshakeTimeout = 2 * time.Second
	maxHandshakes    = 16
	maxLockTimeout   = (1<<32 - 1) * time.Millisecond
	maxPairTimeout   = 24 * time.Hour
	pairWrite        = 4096     // the importer's bytes, read back by the exporter
	maxPairSize      = 64 << 20 // the most an importer maps and reads of an offer
)

// Causes of a failed pair, as the JSON and the peer's messages name them.
const (
	causeUnreachable = "peer-unreachable"
	causeTimeout     = "timeout"
	causeSecret      = "secret-refused"
	causeProtocol    = "protocol-error"
	causeNoChannel   = "no-imex-channel"
	causeNoDaemon    = "imex-daemon-not-running"
	causeDomain      = "not-same-imex-domain"
	causeMismatch    = "bytes-differ"
	causeFailed      = "failed"
)

// causeRemedies are the remedies of the causes that have one, which the peer's messages
// name without it; every cause is a key.
var causeRemedies = map[string]string{
	causeUnreachable: "", causeTimeout: "", causeSecret: "", causeProtocol: "", causeMismatch: "", causeFailed: "",
	causeNoChannel: "give the process an IMEX channel: in Kubernetes a ComputeDomain claim of the NVIDIA DRA driver (or NVIDIA_IMEX_CHANNELS=0 with the channel on the host); on a host, mknod /dev/nvidia-caps-imex-channels/channel0 (vmmprobe check's remedy has the command)",
	causeNoDaemon:  "run nvidia-imex on both nodes (systemctl enable --now nvidia-imex) with both listed in /etc/nvidia-imex/nodes_config.cfg, or use the DRA driver's ComputeDomain, which runs it",
	causeDomain:    "put both nodes in one IMEX domain: the same nodes_config.cfg on each, or one ComputeDomain; nodes of different NVLink cliques cannot share memory",
}

func knownCause(c string) bool {
	_, ok := causeRemedies[c]
	return ok
}

// The steps, in order; each is timed.
var pairSteps = []string{"listen", "connect", "auth", "create", "export", "import", "map", "check", "write", "confirm"}

type pairOptions struct {
	listen, connect string
	secretFile      string
	timeout         time.Duration
	device          int
}

func (p *pairOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&p.listen, "listen", "", "pair: export, and wait for the importer on `address` (host:port; :7777 on every interface)")
	fs.StringVar(&p.connect, "connect", "", "pair: import from the exporter at `address` (host:port), retrying until it listens")
	fs.StringVar(&p.secretFile, "secret-file", "", "pair: read the shared secret (at least 16 bytes) from `path`; default $"+envPairSecret)
	fs.DurationVar(&p.timeout, "timeout", defaultTimeout, "pair: the `duration` no step may outlive, from start to verdict; checkpoint: how\n"+
		"long the lock waits for the process's CUDA calls in flight (more than 0s)")
	fs.IntVar(&p.device, "device", 0, "pair: the CUDA device `index` whose memory is exported, or that maps the import")
}

// check validates the pair flags against the command.
func (p *pairOptions) check(command string) error {
	if command == cmdCheckpoint && (p.timeout <= 0 || p.timeout > maxLockTimeout) {
		return fmt.Errorf("--timeout %v: more than 0s and at most %v (the driver's lock takes milliseconds in 32 bits)", p.timeout, maxLockTimeout)
	}
	if command != cmdPair {
		return nil
	}
	switch {
	case (p.listen == "") == (p.connect == ""):
		return errors.New("pair needs one of --listen ADDR (the exporter) and --connect ADDR (the importer)")
	case p.timeout <= 0 || p.timeout > maxPairTimeout:
		return fmt.Errorf("--timeout %v: more than 0s and at most %v", p.timeout, maxPairTimeout)
	case p.device < 0:
		return fmt.Errorf("--device %d: must not be negative", p.device)
	}
	for flag, addr := range map[string]string{"--listen": p.listen, "--connect": p.connect} {
		if addr == "" {
			continue
		}
		// The port must be a number or a service name here: the dialer would retry a name
		// that is neither until --timeout.
		_, port, err := net.SplitHostPort(addr)
		n := 0
		if err == nil {
			n, err = net.LookupPort("tcp", port)
		}
		if err == nil && n == 0 && flag == "--connect" {
			err = errors.New("no port: name the one the exporter listens on")
		}
		if err != nil {
			return fmt.Errorf("%s %q: %w", flag, addr, err)
		}
	}
	return nil
}

// readSecret reads the shared secret from the file or the environment.
func (p *pairOptions) readSecret(getenv func(string) string) ([]byte, error) {
	var b []byte
	if p.secretFile != "" {
		// Stat first: opening a FIFO would block until a writer comes.
		if st, err := os.Stat(p.secretFile); err != nil {
			return nil, fmt.Errorf("--secret-file: %w", err)
		} else if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("--secret-file %s: not a regular file", p.secretFile)
		}
		f, err := os.Open(p.secretFile)
		if err != nil {
			return nil, fmt.Errorf("--secret-file: %w", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return nil, fmt.Errorf("--secret-file %s: not a regular file", p.secretFile)
		}
		if b, err = io.ReadAll(io.LimitReader(f, maxPairSecret+1)); err != nil {
			return nil, fmt.Errorf("--secret-file: %w", err)
		}
	} else {
		b = []byte(getenv(envPairSecret))
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	switch {
	case len(b) == 0 && p.secretFile == "":
		return nil, fmt.Errorf("pair needs the shared secret: --secret-file PATH or $%s", envPairSecret)
	case len(b) < minPairSecret || len(b) > maxPairSecret:
		return nil, fmt.Errorf("the shared secret has %d bytes: it must have %d to %d", len(b), minPairSecret, maxPairSecret)
	case strings.HasPrefix(string(b), "replace-me"):
		return nil, errors.New("the shared secret is the sample's placeholder: make one with openssl rand -hex 32")
	}
	return b, nil
}

// pairReport is what pair writes.
type pairReport struct {
	Command   string      `json:"command"`
	Vmmprobe  programInfo `json:"vmmprobe"`
	Backend   string      `json:"backend"`
	Role      string      `json:"role"`
	Address   string      `json:"address"`
	Device    int         `json:"device"`
	OK        bool        `json:"ok"`
	Cause     string      `json:"cause,omitempty"`
	Diagnosis string      `json:"diagnosis"`
	Remedy    string      `json:"remedy,omitempty"`
	Error     string      `json:"error,omitempty"`
	SizeBytes uint64      `json:"size_bytes,omitempty"`
	// SameHost says whether the peer runs on this host (by boot id); absent before the
	// peer proved the secret.
	SameHost *bool     `json:"same_host,omitempty"`
	Steps    steps     `json:"steps"`
	Local    *pairNode `json:"local,omitempty"` // absent when it was not read before the deadline
	Remote   *pairNode `json:"remote,omitempty"`
}

// pairRun is one run of either side.
type pairRun struct {
	rep      pairReport
	code     int // the exit code when it is not the verdict's (a usage or runtime failure)
	deadline time.Time
	secret   []byte
	m        *vmm.Manager
	sess     *pairSession
	conn     net.Conn
	conns    chan net.Conn // the connection, for runPair to close when the deadline passes
}

// fail sets the verdict; an I/O that ran into the deadline is a timeout whatever the step
// was.
func (r *pairRun) fail(cause, diagnosis, remedy string, err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		cause, diagnosis, remedy = causeTimeout, fmt.Sprintf("%s, and the deadline (--timeout) passed", diagnosis),
			"the peer must start within the deadline and answer in it: raise --timeout, or see why the peer is slow"
	}
	r.rep.OK, r.rep.Cause, r.rep.Diagnosis, r.rep.Remedy = false, cause, diagnosis, remedy
	if err != nil {
		r.rep.Error = errText(err)
	}
}

// wireFail sets the verdict for an error of the connection.
func (r *pairRun) wireFail(what string, err error) {
	switch {
	case errors.Is(err, errRefusedSecret):
		r.fail(causeSecret, what+": the shared secret was refused", "give both sides the same secret (--secret-file or $"+envPairSecret+")", err)
	case errors.Is(err, errPairProtocol):
		r.fail(causeProtocol, what+": the peer does not speak vmmprobe pair (or another version)", "point --connect at a vmmprobe pair --listen of the same release", err)
	default:
		r.fail(causeUnreachable, what+": the connection failed", "", err)
	}
}

func runPair(sel *opened, opts options, d deps, stdout io.Writer, warnOut func(string)) int {
	warn, silence := untilReturn(warnOut) // the run may outlive its deadline
	defer silence()
	deadline := time.Now().Add(opts.pair.timeout)
	secret, err := opts.pair.readSecret(os.Getenv)
	if err != nil {
		warn(err.Error())
		return exitUsage
	}
	base := pairReport{Command: cmdPair, Vmmprobe: d.program(),
		Backend: sel.info.Name, Device: opts.pair.device, Steps: steps{}, Role: roleImporter, Address: opts.pair.connect}
	if opts.pair.listen != "" {
		base.Role, base.Address = roleExporter, opts.pair.listen
	}
	// The run goes on in a goroutine of its own, so that no step, a driver call or NVML
	// included, outlives the deadline: when it passes, the verdict is a timeout, the
	// connection is closed under the run, and what is left of it ends with the process.
	r := &pairRun{deadline: deadline, m: vmm.New(sel.b), secret: secret, rep: base, conns: make(chan net.Conn, 1)}
	done, local := make(chan struct{}), make(chan pairNode, 1)
	go func() {
		defer close(done)
		n := localPairNode(sel, d.system(sel), d)
		local <- n
		r.rep.Local = &n
		if r.rep.Role == roleExporter {
			r.export(opts.pair.listen, opts.pair.device, warn)
		} else {
			r.importFrom(opts.pair.connect, opts.pair.device)
		}
		if r.conn != nil {
			r.conn.Close()
		}
	}()
	rep, code := &base, 0
	select {
	case <-done:
		rep, code = &r.rep, r.code
	case <-time.After(time.Until(deadline) + time.Second):
		select {
		case c := <-r.conns:
			c.Close()
		default:
		}
		select {
		case n := <-local:
			rep.Local = &n
		default: // what was not read is not said
		}
		rep.Cause, rep.Diagnosis = causeTimeout, "a step did not finish within the deadline (--timeout): the driver, NVML or the peer did not answer"
		rep.Remedy = "raise --timeout, or see what hangs on this node (vmmprobe check)"
	}
	if exit := writeReport(opts, stdout, rep, renderPair(rep), rep.OK, warn); exit == exitFailure || code == 0 {
		return exit
	}
	return code
}

// localPairNode is what this side says of its node.
func localPairNode(sel *opened, sys system, d deps) pairNode {
	var n pairNode
	boot, err := sys.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		boot = []byte("unknown boot id: " + err.Error())
	}
	sum := sha256.Sum256(append([]byte("vmmprobe pair host "), strings.TrimSpace(string(boot))...))
	n.Host = hex.EncodeToString(sum[:8])
	doc, err := gather(&opened{info: sel.info, cfg: sel.cfg}, sys, cmdReport, programInfo{}, d.now())
	if err != nil {
		return n
	}
	n.Channel = doc.IMEX != nil && doc.IMEX.Ready
	if doc.Node != nil {
		n.Daemon = len(doc.Node.IMEXDaemon.Processes) > 0
		n.Clique = doc.Node.Clique.Value
	}
	return n
}

// export is the listening side.
func (r *pairRun) export(addr string, dev int, warn func(string)) {
	ln, err := timed(&r.rep.Steps, "listen", func() (net.Listener, error) { return net.Listen("tcp", addr) })
	if err != nil {
		r.fail(causeFailed, "cannot listen on "+addr, "choose a free port this process may bind", err)
		r.code = exitFailure
		return
	}
	defer ln.Close()
	warn("pair: listening on " + ln.Addr().String())
	_ = ln.(*net.TCPListener).SetDeadline(r.deadline)
	if last, err := r.accept(ln); err != nil {
		if last != nil {
			r.wireFail("no importer proved the secret; the last connection", last)
			return
		}
		r.fail(causeTimeout, "no importer connected", "start vmmprobe pair --connect on the other side within --timeout", err)
		return
	}
	// The memory: created, mapped, filled (and read back), exported.
	p := vmm.DeviceProps(dev)
	p.HandleTypes = cu.MEM_HANDLE_TYPE_FABRIC
	var t *trial
	var fh ipc.FabricHandle
	seed := byte(time.Now().UnixNano()) | 1 // never 0, which the offer's JSON would leave out
	err = r.rep.Steps.run("create", func() error {
		g, err := r.m.Granularity(p, false)
		if err == nil {
			t, _, err = openTrial(r.m, p, g, []int{dev}, 0, seed, nil)
		}
		return err
	})
	if err == nil {
		defer t.close()
		fh, err = timed(&r.rep.Steps, "export", func() (ipc.FabricHandle, error) { return ipc.ExportFabric(t.mem) })
	}
	offer := &pairMsg{Node: *r.rep.Local, Seed: seed}
	if err != nil {
		if r.rep.Local.Channel {
			r.fail(causeFailed, fmt.Sprintf("the exporter (this process) cannot create and export fabric memory on device %d", dev), "", err)
		} else {
			r.fail(causeNoChannel, fmt.Sprintf("the exporter (this process) cannot create fabric memory on device %d: it has no IMEX channel", dev), causeRemedies[causeNoChannel], err)
		}
		offer.Cause, offer.Detail = r.rep.Cause, peerView(r.rep.Diagnosis)
		_ = r.sess.send(offer)
		return
	}
	r.rep.SizeBytes = fh.Size
	offer.Handle = fh.String()
	var res *pairMsg
	if err := r.rep.Steps.run("confirm", func() (err error) {
		if err = r.sess.send(offer); err == nil {
			res, err = r.sess.recv()
		}
		return err
	}); err != nil {
		r.wireFail("waiting for the importer's result", err)
		return
	}
	r.peer(res.Node)
	for _, s := range pairSteps {
		if us, ok := res.Steps[s]; ok {
			r.rep.Steps = append(r.rep.Steps, pairStep{Step: "peer " + s, Microseconds: int64(us)})
		}
	}
	if res.Cause != "" {
		r.fail(res.Cause, res.Detail, causeRemedies[res.Cause], nil)
		return
	}
	got := make([]byte, pairWrite)
	verdict := &pairMsg{Node: *r.rep.Local}
	if err := r.m.ReadAt(dev, got, t.mp.Addr()); err != nil {
		r.fail(causeFailed, "the exporter (this process) could not read the importer's write back", "", err)
	} else if err := compare(got, pattern.Bytes(seed+1, pairWrite)); err != nil {
		r.fail(causeMismatch, "the importer's write does not read back in the exporter (this process)", "", err)
	} else {
		r.succeed()
	}
	verdict.Cause, verdict.Detail = r.rep.Cause, peerView(r.rep.Diagnosis)
	_ = r.sess.send(verdict)
}

// importFrom is the connecting side.
func (r *pairRun) importFrom(addr string, dev int) {
	if err := r.rep.Steps.run("connect", func() error { return r.dial(addr) }); err != nil {
		r.fail(causeUnreachable, "cannot connect to the exporter at "+addr,
			"start vmmprobe pair --listen there first; check the address, the port and any network policy between the two", err)
		if errors.As(err, new(*net.AddrError)) {
			r.code = exitUsage
		}
		return
	}
	if err := r.authenticate(); err != nil {
		r.wireFail("the handshake with "+addr, err)
		return
	}
	offer, err := timed(&r.rep.Steps, "export", r.sess.recv)
	if err != nil {
		r.wireFail("waiting for the exporter's offer", err)
		return
	}
	r.peer(offer.Node)
	if offer.Cause != "" {
		r.fail(offer.Cause, offer.Detail, causeRemedies[offer.Cause], nil)
		return
	}
	res := &pairMsg{Node: *r.rep.Local, Steps: map[string]uint32{}}
	if err := r.use(offer, dev, res); err != nil {
		res.Cause, res.Detail = r.rep.Cause, peerView(r.rep.Diagnosis)
	}
	for _, s := range r.rep.Steps {
		if s.Step == "import" || s.Step == "map" || s.Step == "check" || s.Step == "write" {
			res.Steps[s.Step] = uint32(min(s.Microseconds, 1<<32-1))
		}
	}
	var verdict *pairMsg
	what := "sending the result to the exporter"
	err = r.rep.Steps.run("confirm", func() (err error) {
		if err = r.sess.send(res); err == nil && res.Cause == "" {
			what = "waiting for the exporter's verdict"
			verdict, err = r.sess.recv()
		}
		return err
	})
	switch {
	case res.Cause != "":
	case err != nil:
		r.wireFail(what, err)
	case verdict.Cause != "":
		r.fail(verdict.Cause, verdict.Detail, causeRemedies[verdict.Cause], nil)
	default:
		r.succeed()
	}
}

// use imports the offered memory, maps it, checks it and writes this side's bytes.
func (r *pairRun) use(offer *pairMsg, dev int, res *pairMsg) error {
	var fh ipc.FabricHandle
	err := fh.UnmarshalText([]byte(offer.Handle))
	if err == nil && (fh.Size == 0 || fh.Size > maxPairSize) {
		err = fmt.Errorf("the offered handle names %s, and the importer maps 1 byte to %s", units.Size(fh.Size), units.Size(maxPairSize))
	}
	if err != nil {
		r.fail(causeProtocol, "the exporter's offer is not a usable fabric handle", "", err)
		return err
	}
	r.rep.SizeBytes = fh.Size
	mem, err := timed(&r.rep.Steps, "import", func() (*vmm.Allocation, error) { return fh.Import(r.m) })
	if err != nil {
		r.importFailed(err)
		return err
	}
	defer mem.Close()
	var va *vmm.Reservation
	err = r.rep.Steps.run("map", func() (err error) {
		if va, err = r.m.Reserve(fh.Size); err != nil {
			return err
		}
		mp, err := va.Map(0, mem)
		if err == nil {
			err = mp.SetAccess(vmm.ReadWrite(dev)...)
		}
		return err
	})
	if va != nil {
		defer va.Close()
	}
	if err == nil {
		err = r.rep.Steps.run("check", func() error {
			got := make([]byte, fh.Size)
			if _, err := va.From(dev).ReadAt(got, 0); err != nil {
				return err
			}
			if err := compare(got, pattern.Bytes(offer.Seed, int(fh.Size))); err != nil {
				return fmt.Errorf("%w: %w", errMismatch, err)
			}
			return nil
		})
	}
	if err == nil {
		err = r.rep.Steps.run("write", func() error {
			_, err := va.From(dev).WriteAt(pattern.Bytes(offer.Seed+1, pairWrite), 0)
			return err
		})
	}
	switch {
	case errors.Is(err, errMismatch):
		r.fail(causeMismatch, "the memory the importer imported does not hold the exporter's bytes", "", err)
	case err != nil:
		r.fail(causeFailed, fmt.Sprintf("the importer (this process) could not map or copy the imported %s on device %d", units.Size(fh.Size), dev), "", err)
	}
	return err
}

// importFailed names why the driver refused the import, from both nodes' facts: a refusal
// (NOT_SUPPORTED, NOT_PERMITTED, as the recorded driver refuses a fabric handle it cannot
// resolve) is the IMEX setup's; anything else (out of memory, a size that is not the
// allocation's) is a failure of its own.
func (r *pairRun) importFailed(err error) {
	l, p := *r.rep.Local, *r.rep.Remote
	refused := errors.Is(err, cu.ERROR_NOT_SUPPORTED) || errors.Is(err, cu.ERROR_NOT_PERMITTED)
	switch {
	case !refused:
		r.fail(causeFailed, "the importer (this process) could not import the fabric handle", "", err)
	case !l.Channel:
		r.fail(causeNoChannel, "the importer (this process) has no IMEX channel, so the driver refuses fabric imports", causeRemedies[causeNoChannel], err)
	case l.Host == p.Host:
		r.fail(causeFailed, "the driver refused the import of memory exported on this same host", "", err)
	case !l.Daemon || !p.Daemon:
		side := "on the importer's node"
		if l.Daemon {
			side = "on the exporter's node"
		} else if !p.Daemon {
			side = "on either node"
		}
		r.fail(causeNoDaemon, "the driver refused the import across nodes, and the nvidia-imex daemon is not running "+side, causeRemedies[causeNoDaemon], err)
	case l.Clique != p.Clique:
		r.fail(causeDomain, fmt.Sprintf("the driver refused the import across nodes: they are in different NVLink cliques (here %q, the exporter %q)", l.Clique, p.Clique), causeRemedies[causeDomain], err)
	default:
		r.fail(causeDomain, "the driver refused the import across nodes although both run nvidia-imex: their daemons do not form one IMEX domain", causeRemedies[causeDomain], err)
	}
}

// peerView is a diagnosis of this side as the peer prints it.
func peerView(diagnosis string) string {
	return oneLine(strings.ReplaceAll(diagnosis, " (this process)", ""))
}

// dial connects to addr, retrying until the deadline: the exporter may start later.
func (r *pairRun) dial(addr string) error {
	var last error
	for {
		left := time.Until(r.deadline)
		if left <= 0 {
			if last == nil {
				last = os.ErrDeadlineExceeded
			}
			return last
		}
		c, err := net.DialTimeout("tcp", addr, min(left, 2*time.Second))
		if err == nil {
			r.conn = c
			return nil
		}
		last = err
		if errors.As(err, new(*net.AddrError)) {
			return err // a malformed address does not get better
		}
		time.Sleep(min(200*time.Millisecond, time.Until(r.deadline)))
	}
}

// authenticate runs the importer's handshake under the deadline; the session is set when
// the exporter proved the secret.
func (r *pairRun) authenticate() error {
	r.adopt(r.conn)
	_ = r.conn.SetDeadline(r.deadline)
	var err error
	r.sess, err = timed(&r.rep.Steps, "auth", func() (*pairSession, error) { return handshake(r.conn, r.secret, roleImporter) })
	return err
}

// adopt makes c the run's connection, the one runPair closes when the deadline passes.
func (r *pairRun) adopt(c net.Conn) {
	select {
	case <-r.conns:
	default:
	}
	r.conn = c
	r.conns <- c
}

// handshook is a connection the exporter accepted, and how its handshake went.
type handshook struct {
	c    net.Conn
	s    *pairSession
	err  error         // of the handshake; of Accept when c is nil
	at   time.Time     // accepted
	took time.Duration // from then to the end of the handshake
}

// accept waits for the importer until the deadline. Each connection is taken from the
// backlog at once and has handshakeTimeout to prove the secret; those that do not (a port
// scan, a health check that says nothing, a wrong secret) are closed. At most maxHandshakes
// run at a time: a new connection closes the oldest still in its handshake, so that
// strangers keep the importer out only by opening more than that within its one round
// trip. It returns nil once the session is set, or Accept's error and the last handshake's.
func (r *pairRun) accept(ln net.Listener) (last, err error) {
	t0 := time.Now()
	results, stop := make(chan handshook), make(chan struct{})
	defer close(stop)
	var mu sync.Mutex
	var inflight []net.Conn // oldest first
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				select {
				case results <- handshook{err: err}:
				case <-stop:
				}
				return
			}
			at := time.Now()
			mu.Lock()
			if len(inflight) == maxHandshakes {
				inflight[0].Close() // its handshake fails at once
				inflight = inflight[1:]
			}
			inflight = append(inflight, c)
			mu.Unlock()
			go func() {
				deadline := at.Add(handshakeTimeout)
				if r.deadline.Before(deadline) {
					deadline = r.deadline
				}
				_ = c.SetDeadline(deadline)
				s, err := handshake(c, r.secret, roleExporter)
				mu.Lock()
				if i := slices.Index(inflight, c); i >= 0 {
					inflight = slices.Delete(inflight, i, i+1)
				} else if err == nil {
					err = net.ErrClosed // closed for a newer connection as it finished
				}
				mu.Unlock()
				select {
				case results <- handshook{c, s, err, at, time.Since(at)}:
				case <-stop:
					c.Close()
				}
			}()
		}
	}()
	for {
		h := <-results
		switch {
		case h.c == nil:
			r.rep.Steps = append(r.rep.Steps, pairStep{"connect", time.Since(t0).Microseconds()})
			return last, h.err
		case h.err != nil:
			h.c.Close()
			last = h.err
		default:
			ln.Close() // no more strangers to answer
			_ = h.c.SetDeadline(r.deadline)
			r.adopt(h.c)
			r.sess = h.s
			r.rep.Steps = append(r.rep.Steps, pairStep{"connect", h.at.Sub(t0).Microseconds()}, pairStep{"auth", h.took.Microseconds()})
			return nil, nil
		}
	}
}

// peer records what the authenticated peer says of its node.
func (r *pairRun) peer(n pairNode) {
	r.rep.Remote = &n
	same := n.Host == r.rep.Local.Host
	r.rep.SameHost = &same
}

func (r *pairRun) succeed() {
	r.rep.OK, r.rep.Cause, r.rep.Remedy, r.rep.Error = true, "", "", ""
	where := "another host"
	if r.rep.SameHost != nil && *r.rep.SameHost {
		where = "this host"
	}
	if r.rep.Role == roleExporter {
		r.rep.Diagnosis = fmt.Sprintf("a process on %s imported this process's %s of fabric memory, read its bytes and wrote bytes read back here", where, units.Size(r.rep.SizeBytes))
	} else {
		r.rep.Diagnosis = fmt.Sprintf("imported %s of fabric memory exported by a process on %s, read its bytes and wrote bytes it read back", units.Size(r.rep.SizeBytes), where)
	}
}

// renderPair is the table form.
func renderPair(r *pairReport) string {
	var b strings.Builder
	verdictLines(&b, "pair", r.OK, " ("+r.Cause+")", r.Diagnosis, r.Error)
	if r.Remedy != "" {
		kvLine(&b, 2, "remedy", r.Remedy)
	}
	kvLine(&b, 0, "role", fmt.Sprintf("%s, device %d, %s, backend %s", r.Role, r.Device, r.Address, r.Backend))
	if r.SameHost != nil {
		peer := "on another host"
		if *r.SameHost {
			peer = "on this host"
		}
		kvLine(&b, 0, "peer", peer+nodeText(*r.Remote))
	}
	if r.Local != nil {
		kvLine(&b, 0, "this node", strings.TrimPrefix(nodeText(*r.Local), ": "))
	} else {
		kvLine(&b, 0, "this node", "not read before the deadline")
	}
	kvLine(&b, 0, "steps", r.Steps.String())
	return b.String()
}

func nodeText(n pairNode) string {
	yes := func(b bool, s string) string {
		if b {
			return s
		}
		return "no " + s
	}
	s := ": " + yes(n.Channel, "IMEX channel") + ", " + yes(n.Daemon, "IMEX daemon")
	if n.Clique != "" {
		s += ", clique " + n.Clique
	}
	return s
}
