package loader

import (
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// EnvPath is the environment variable that overrides the driver library path.
const EnvPath = "CUVMM_LIBCUDA"

// EnvNVMLPath is the environment variable that overrides the NVML library path.
const EnvNVMLPath = "CUVMM_LIBNVML"

// kind is what tells the libraries loader opens apart: their names, and how their symbols
// are resolved. Everything else (the regular-file check, the retry, symbol errors) is shared.
type kind struct {
	what  string          // for messages: "CUDA driver", "NVML library"
	env   string          // the environment variable that overrides the path
	paths func() []string // the platform's names, in the order they are tried
	getPA bool            // resolve through cuGetProcAddress_v2 where the library has it
}

var (
	cudaKind = &kind{what: "CUDA driver", env: EnvPath, paths: cudaPaths, getPA: true}
	// NVML has no cuGetProcAddress: each symbol is looked up by its export name.
	nvmlKind = &kind{what: "NVML library", env: EnvNVMLPath, paths: nvmlPaths}
)

// Option configures a Library before it loads.
type Option func(*config)

type config struct {
	path string
}

// WithPath loads the library from path instead of the platform's default names. It takes
// precedence over the environment variable (CUVMM_LIBCUDA for the driver).
func WithPath(path string) Option { return func(c *config) { c.path = path } }

// Library is one driver library, opened on first use. Its methods are safe for concurrent
// use.
//
// A load that fails is tried again by a later use once a backoff has passed (one second
// after the first failure, doubling with each failure in a row up to 30 seconds), or at
// once by Retry; however many goroutines ask, at most one attempt runs at a time and none
// starts before its time. A load that succeeds is final: every symbol comes from that one
// file. Only Default, NVML and New make a Library that can load: a zero Library's loads
// fail with an error.
type Library struct {
	kind *kind
	cfg  config
	src  source           // tests inject a fake
	now  func() time.Time // nil: time.Now; tests inject a clock

	loaded atomic.Bool // path and getPA are set and final: Load's fast path
	path   string
	getPA  bool // cuGetProcAddress_v2 resolved: use it for every symbol

	mu       sync.Mutex // guards cfg, procs and the load state below
	procs    []*Proc
	attempt  chan struct{} // non-nil while an attempt runs; closed when it ends
	err      error         // the last attempt's error
	failures int           // failed attempts in a row
	last     time.Time     // when the last attempt ended
	next     time.Time     // when Load may try again
}

// The backoff of a failed load. A driver container or a driver install takes minutes, so a
// process that waits for one notices it within half a minute and costs one dlopen of a
// missing file per half minute meanwhile.
const (
	retryMin = time.Second
	retryMax = 30 * time.Second
)

var (
	defaultLib = &Library{kind: cudaKind, src: systemSource()}
	nvmlLib    = &Library{kind: nvmlKind, src: systemSource()}
)

// Default returns the process-wide driver library that package cu uses.
func Default() *Library { return defaultLib }

// NVML returns the process-wide NVML library (libnvidia-ml.so.1 on Linux; on Windows
// nvml.dll from System32, then from %ProgramFiles%\NVIDIA Corporation\NVSMI), for package
// nvml. It is opened, checked and retried like the driver, and the CUVMM_LIBNVML environment
// variable overrides its path. Its symbols are looked up by export name, so the Version of
// a Symbol is not used; a missing one fails its own calls with a *SymbolError matching
// ErrNotSupported, and a library that cannot be loaded fails every call with one whose
// *LoadError matches ErrNoDriver.
func NVML() *Library { return nvmlLib }

// Configure applies options to the default library. It fails once the library has been
// loaded, since symbols resolved from one file must not be mixed with another's; after a
// failed load it is allowed, and the next attempt uses the new options.
func Configure(opts ...Option) error { return defaultLib.configure(opts) }

// New returns a library distinct from the default one, for programs that need to load a
// specific driver file alongside it (tests, tools comparing drivers).
func New(opts ...Option) *Library {
	l := &Library{kind: cudaKind, src: systemSource()}
	_ = l.configure(opts)
	return l
}

// errConfigured is returned by Configure after the library has loaded.
var errConfigured = errors.New("loader: configure: the driver library is already loaded")

func (l *Library) configure(opts []Option) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded.Load() {
		return errConfigured
	}
	for _, o := range opts {
		o(&l.cfg)
	}
	return nil
}

// Load opens the library if it is not open yet and returns the load error, if any. After a
// failure it returns that error again until the backoff has passed; the first call after
// that tries again.
func (l *Library) Load() error {
	if l.loaded.Load() {
		return nil
	}
	return l.load(false)
}

// Retry tries to open the library now, without waiting for the backoff, and returns the
// result; on a loaded library it does nothing. It is for a program that learns that the
// driver has just arrived (a watched path appeared, a readiness probe passed). Calls while an
// attempt runs share its result, and no attempt starts less than retryMin (one second)
// after the previous one ended, so a loop of Retry calls cannot turn into a storm of dlopen
// calls either.
func (l *Library) Retry() error {
	if l.loaded.Load() {
		return nil
	}
	return l.load(true)
}

// Path is the file the library was loaded from ("" before a successful load).
func (l *Library) Path() string {
	if l.Load() != nil {
		return ""
	}
	return l.path
}

// UsesGetProcAddress reports whether symbols are resolved through cuGetProcAddress_v2
// (true on every driver since CUDA 12.0) rather than by export name.
func (l *Library) UsesGetProcAddress() bool {
	return l.Load() == nil && l.getPA
}

func (l *Library) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// load is the slow path of Load (now false) and Retry (now true).
func (l *Library) load(now bool) error {
	if l.kind == nil || l.src == nil {
		return errZeroLibrary
	}
	l.mu.Lock()
	if ch := l.attempt; ch != nil {
		l.mu.Unlock()
		<-ch
		return l.Load() // the attempt's result: loaded, or its error within the backoff
	}
	if l.loaded.Load() {
		l.mu.Unlock()
		return nil
	}
	if l.failures > 0 {
		t := l.clock()
		if t.Before(l.next) && (!now || t.Before(l.last.Add(retryMin))) {
			err := l.err
			l.mu.Unlock()
			return err
		}
	}
	ch := make(chan struct{})
	l.attempt = ch
	cfg := l.cfg
	l.mu.Unlock()

	path, getPA, err := l.open(cfg)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempt = nil
	close(ch)
	if err != nil {
		l.err = err
		l.failures++
		l.last = l.clock()
		l.next = l.last.Add(min(retryMin<<min(l.failures-1, 5), retryMax)) // 1s, 2s, 4s, ... 30s
		return err
	}
	l.path, l.getPA = path, getPA
	l.err, l.failures = nil, 0
	l.loaded.Store(true)
	return nil
}

// open makes one attempt at opening the library.
func (l *Library) open(cfg config) (path string, getPA bool, err error) {
	names := l.kind.paths()
	paths, builtin := names, true
	override := cfg.path
	if override == "" {
		override = os.Getenv(l.kind.env)
	}
	if override != "" {
		// An override that is one of the platform's own names is searched for like it.
		paths, builtin = []string{override}, slices.Contains(names, override)
	}
	path, err = l.src.open(paths, builtin)
	if err != nil {
		if le, ok := err.(*LoadError); ok {
			le.Library = l.kind.what
		}
		return "", false, err
	}
	return path, l.kind.getPA && l.src.hasGetProcAddress(), nil
}

// Procs lists every Proc created on this library, in creation order.
func (l *Library) Procs() []*Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Proc(nil), l.procs...)
}

// source is what a Library needs from the operating system. The system implementation
// lives in the platform files; tests use a fake.
type source interface {
	// open loads the first path that works and returns it, or a *LoadError. builtin says
	// that paths are the platform's own names rather than an override, which on Windows
	// restricts the search for a bare name to System32.
	open(paths []string, builtin bool) (string, error)
	// lookup finds an exported symbol by its exact name.
	lookup(name string) (uintptr, error)
	// hasGetProcAddress looks up cuGetProcAddress_v2 in the loaded library.
	hasGetProcAddress() bool
	// getProcAddress calls cuGetProcAddress_v2 and returns its CUresult and query status.
	getProcAddress(name string, version int, flags uint64) (addr uintptr, result int32, status int32)
}
