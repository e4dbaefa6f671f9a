package loader

import (
	"sync"
	"sync/atomic"
)

// legacyStream is CU_GET_PROC_ADDRESS_LEGACY_STREAM, the flag every symbol is resolved with:
// the behaviour of a C program built without per-thread default streams, stated so that
// the ABI does not depend on the driver's default.
const legacyStream = 1 << 0

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
}

func (s Symbol) export() string {
	if s.Export != "" {
		return s.Export
	}
	return s.Name
}

// Proc is a lazily resolved driver entry point, resolved on the first call of Addr. Once
// the library is loaded the result is kept for good: the address, or why the symbol is
// missing. While the library cannot be loaded, each call of Addr asks it again (it retries
// after its backoff), so a Proc resolves once the driver has arrived.
//
// A Proc is safe for concurrent use. Resolving is serialized per Proc, across the library's
// load and the driver's cuGetProcAddress; once resolved, Addr is one atomic load and waits
// for nothing.
type Proc struct {
	lib  *Library
	sym  Symbol
	addr atomic.Uintptr // the resolved address, 0 until then: Addr's inlined path
	mu   sync.Mutex     // serializes resolution
	done atomic.Bool    // err holds why the symbol is missing, for good
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
// Addr is small enough to be inlined into every driver call: once resolved it is one atomic
// load, of the address itself.
func (p *Proc) Addr() (addr uintptr, err error) {
	if addr = p.addr.Load(); addr == 0 {
		addr, err = p.resolve()
	}
	return
}

// Find resolves p and reports only whether that worked; for listings.
func (p *Proc) Find() error {
	_, err := p.Addr()
	return err
}

// resolve is Addr's slow path, kept out of line so that Addr stays inlinable. A failure to
// load the library is returned without being kept.
//
//go:noinline
func (p *Proc) resolve() (uintptr, error) {
	if p.lib == nil {
		return 0, &SymbolError{Name: p.sym.Name, Version: p.sym.Version, Status: DriverNotLoaded, Err: errZeroProc}
	}
	if p.done.Load() {
		return 0, p.err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.addr.Load(); a != 0 {
		return a, nil
	}
	if p.done.Load() {
		return 0, p.err
	}
	addr, err := p.lib.resolve(p.sym)
	switch {
	case err == nil:
		p.addr.Store(addr)
		return addr, nil
	case err.Status == DriverNotLoaded:
		return 0, err
	}
	p.err = err
	p.done.Store(true)
	return 0, err
}

func (l *Library) resolve(s Symbol) (uintptr, *SymbolError) {
	if err := l.Load(); err != nil {
		return 0, &SymbolError{Name: s.Name, Version: s.Version, Status: DriverNotLoaded, Err: err}
	}
	if l.getPA {
		addr, res, status := l.src.getProcAddress(s.Name, s.Version, legacyStream)
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
