package loader

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNoDriver matches every error that means the CUDA driver library could not be loaded.
	ErrNoDriver = errors.New("loader: no CUDA driver")
	// ErrUnsupportedPlatform matches the load error on systems that have no CUDA driver at all
	// (macOS, for one). It also matches ErrNoDriver.
	ErrUnsupportedPlatform = errors.New("loader: no CUDA driver on this platform")
	// ErrNotSupported matches every error of a symbol the driver lacks or has only in an older
	// ABI version than the caller needs.
	ErrNotSupported = errors.New("loader: not supported by this driver")
)

// LoadError says why the driver library could not be opened: every path tried and the
// system's reason for each.
type LoadError struct {
	Tried   []string // paths or names passed to dlopen/LoadLibraryEx, in order
	Reasons []string // the dlerror or Windows error text for each entry of Tried
	// Platform is set when this operating system has no CUDA driver; Tried is then empty.
	Platform string
}

func (e *LoadError) Error() string {
	if e.Platform != "" {
		return "loader: no CUDA driver on this platform (" + e.Platform + ")"
	}
	var b strings.Builder
	b.WriteString("loader: cannot load the CUDA driver:")
	for i, p := range e.Tried {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s: %s", p, e.Reasons[i])
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNoDriver) true for every load failure.
func (e *LoadError) Is(target error) bool {
	return target == ErrNoDriver || (target == ErrUnsupportedPlatform && e.Platform != "")
}

// SymbolStatus says why a symbol did not resolve.
type SymbolStatus int

const (
	// SymbolNotFound: the driver does not export the symbol at all.
	SymbolNotFound SymbolStatus = 1
	// VersionNotSufficient: the symbol exists, but not in the ABI version asked for
	// (CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT).
	VersionNotSufficient SymbolStatus = 2
	// DriverNotLoaded: the library itself could not be loaded; Err holds the *LoadError.
	DriverNotLoaded SymbolStatus = 3
)

// SymbolError is the error of a call whose driver symbol could not be resolved.
type SymbolError struct {
	Name    string // the driver's base name, e.g. "cuMemCreate"
	Version int    // the ABI version asked for, e.g. 10020
	Status  SymbolStatus
	Err     error // the underlying load or lookup error, if any
}

func (e *SymbolError) Error() string {
	switch e.Status {
	case VersionNotSufficient:
		return fmt.Sprintf("loader: %s: driver has no version %d of this symbol: %s", e.Name, e.Version, ErrNotSupported.Error()[len("loader: "):])
	case DriverNotLoaded:
		return fmt.Sprintf("loader: %s: %v", e.Name, e.Err)
	}
	if e.Err != nil {
		return fmt.Sprintf("loader: %s: symbol not found (%v): %s", e.Name, e.Err, ErrNotSupported.Error()[len("loader: "):])
	}
	return fmt.Sprintf("loader: %s: symbol not found: %s", e.Name, ErrNotSupported.Error()[len("loader: "):])
}

// Is makes a missing or too-old symbol match ErrNotSupported, and a symbol of a library
// that could not be loaded match ErrNoDriver.
func (e *SymbolError) Is(target error) bool {
	if e.Status == DriverNotLoaded {
		return false // Unwrap reaches the *LoadError, which answers ErrNoDriver
	}
	return target == ErrNotSupported
}

func (e *SymbolError) Unwrap() error { return e.Err }
