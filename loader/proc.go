package loader

import (
	"sync"
	"sync/atomic"
)

// Flags of cuGetProcAddress (CUdriverProcAddress_flags).
const (
	GET_PROC_ADDRESS_DEFAULT                   = 0
	GET_PROC_ADDRESS_LEGACY_STREAM             = 1 << 0
	GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1
)

// Query results of cuGetProcAddress (CUdriverProcAddressQueryResult).
const (
	getProcAddressSuccess              = 0
	getProcAddressSymbolNotFound       = 1
	getProcAddressVersionNotSufficient = 2
)

// Symbol names one driver entry point in one ABI version.
type Symbol struct {
	// Name is the base name that cuGetProcAddress takes, e.g. "cuMemcpyHtoD".
	Name string
	// Version is the CUDA version of the ABI the caller uses, as cuda.h's PFN typedefs give
	// it (1000*major + 10*minor): 10020 for the core VMM calls, 11000 for
	// cuMemRetainAllocationHandle, 12010 for multicast.
	Version int
	// Export is the exported name of that ABI version where cuda.h maps the base name to a
	// suffixed one ("cuMemcpyHtoD_v2"); empty means Name. Used only when the driver lacks
	// cuGetProcAddress_v2.
	Export string
	// Flags are passed to cuGetProcAddress. Zero means GET_PROC_ADDRESS_LEGACY_STREAM, the
	// behaviour of a C program built without per-thread default streams; it is stated
	// explicitly so that the ABI does not depend on the driver's default.
	Flags uint64
}

func (s Symbol) export() string {
	if s.Export != "" {
		return s.Export
	}
	return s.Name
}

func (s Symbol) flags() uint64 {
	if s.Flags == 0 {
		return GET_PROC_ADDRESS_LEGACY_STREAM
	}
	return s.Flags
}

// Proc is a lazily resolved driver entry point. Resolution happens once, on the first call
// of Addr; a failure is kept and returned by every later call.
type Proc struct {
	lib  *Library
	sym  Symbol
	once sync.Once
	done atomic.Bool // addr and err hold the resolution: Addr's inlined path
	addr uintptr
	err  error
}

// NewProc declares a symbol of l. It does not load anything.
func (l *Library) NewProc(s Symbol) *Proc {
	p := &Proc{lib: l, sym: s}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	return p
}

// Symbol returns the symbol p resolves.
func (p *Proc) Symbol() Symbol { return p.sym }

// Addr returns the entry point's address, resolving it on first use. The error is a
// *SymbolError: errors.Is(err, ErrNotSupported) for a missing or too-old symbol,
// errors.Is(err, ErrNoDriver) when the library itself did not load.
//
// Addr is small enough to be inlined into every driver call: after the first call it is
// one atomic load.
func (p *Proc) Addr() (uintptr, error) {
	if !p.done.Load() {
		p.resolveOnce()
	}
	return p.addr, p.err
}

// Find resolves p and reports only whether that worked; for listings.
func (p *Proc) Find() error {
	_, err := p.Addr()
	return err
}

// resolveOnce is Addr's slow path, kept out of line so that Addr stays inlinable.
//
//go:noinline
func (p *Proc) resolveOnce() { p.once.Do(p.resolve) }

func (p *Proc) resolve() {
	p.addr, p.err = p.lib.resolve(p.sym)
	p.done.Store(true)
}

func (l *Library) resolve(s Symbol) (uintptr, error) {
	if err := l.Load(); err != nil {
		return 0, &SymbolError{Name: s.Name, Version: s.Version, Status: DriverNotLoaded, Err: err}
	}
	if l.getPA {
		addr, res, status := l.src.getProcAddress(s.Name, s.Version, s.flags())
		switch {
		case res == 0 && status == getProcAddressSuccess && addr != 0:
			return addr, nil
		case status == getProcAddressVersionNotSufficient:
			// Never fall back to the export here: it would be an older ABI of the call,
			// with other structs or semantics than the caller was written for.
			return 0, &SymbolError{Name: s.Name, Version: s.Version, Status: VersionNotSufficient}
		case status == getProcAddressSymbolNotFound:
			return 0, &SymbolError{Name: s.Name, Version: s.Version, Status: SymbolNotFound}
		}
		// Any other failure of cuGetProcAddress itself: try the export name below.
	}
	addr, err := l.src.lookup(s.export())
	if err != nil || addr == 0 {
		return 0, &SymbolError{Name: s.Name, Version: s.Version, Status: SymbolNotFound, Err: err}
	}
	return addr, nil
}
