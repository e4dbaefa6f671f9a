package loader

import (
	"errors"
	"os"
	"sync"
)

// EnvPath is the environment variable that overrides the driver library path.
const EnvPath = "CUVMM_LIBCUDA"

// Option configures a Library before it loads.
type Option func(*config)

type config struct {
	path string
}

// WithPath loads the driver from path instead of the platform's default names. It takes
// precedence over the CUVMM_LIBCUDA environment variable.
func WithPath(path string) Option { return func(c *config) { c.path = path } }

// Library is one driver library, opened on first use. Its methods are safe for concurrent
// use; the first of them to need the library opens it, once.
type Library struct {
	cfg config
	src source // nil until configured; tests inject a fake

	once   sync.Once
	path   string
	err    error
	getPA  bool // cuGetProcAddress_v2 resolved: use it for every symbol
	mu     sync.Mutex
	procs  []*Proc
	loaded bool
}

var defaultLib = &Library{src: systemSource()}

// Default returns the process-wide driver library that package cu uses.
func Default() *Library { return defaultLib }

// Configure applies options to the default library. It fails once the library has been
// loaded, since symbols resolved from one file must not be mixed with another's.
func Configure(opts ...Option) error { return defaultLib.configure(opts) }

// New returns a library distinct from the default one, for programs that need to load a
// specific driver file alongside it (tests, tools comparing drivers).
func New(opts ...Option) *Library {
	l := &Library{src: systemSource()}
	_ = l.configure(opts)
	return l
}

// errConfigured is returned by Configure after the library has loaded.
var errConfigured = errors.New("loader: configure: the driver library is already loaded")

func (l *Library) configure(opts []Option) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded {
		return errConfigured
	}
	for _, o := range opts {
		o(&l.cfg)
	}
	return nil
}

// Load opens the library if it is not open yet and returns the load error, if any. The
// error is kept: a library that failed to load is not retried.
func (l *Library) Load() error {
	l.once.Do(l.load)
	return l.err
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

func (l *Library) load() {
	l.mu.Lock()
	l.loaded = true
	cfg := l.cfg
	l.mu.Unlock()

	var paths []string
	switch {
	case cfg.path != "":
		paths = []string{cfg.path}
	case os.Getenv(EnvPath) != "":
		paths = []string{os.Getenv(EnvPath)}
	default:
		paths = l.src.defaultPaths()
	}
	l.path, l.err = l.src.open(paths)
	if l.err != nil {
		return
	}
	l.getPA = l.src.hasGetProcAddress()
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
	defaultPaths() []string
	// open loads the first path that works and returns it, or a *LoadError.
	open(paths []string) (string, error)
	// lookup finds an exported symbol by its exact name.
	lookup(name string) (uintptr, error)
	hasGetProcAddress() bool
	// getProcAddress calls cuGetProcAddress_v2 and returns its CUresult and query status.
	getProcAddress(name string, version int, flags uint64) (addr uintptr, result int32, status int32)
}
