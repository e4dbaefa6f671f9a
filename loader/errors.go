package loader

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNoDriver matches every error that means a library of the NVIDIA driver could not
	// be loaded: the CUDA driver, or NVML (see [NVML]).
	ErrNoDriver = errors.New("loader: no CUDA driver")
	// ErrUnsupportedPlatform matches the load error on systems that have no CUDA driver at all
	// (macOS, for one). It also matches ErrNoDriver.
	ErrUnsupportedPlatform = errors.New("loader: no CUDA driver on this platform")
	// ErrNotSupported matches every error of a symbol the driver lacks or has only in an older
	// ABI version than the caller needs.
	ErrNotSupported = errors.New("loader: not supported by this driver")

	// errZeroLibrary is the load of a Library that no constructor made.
	errZeroLibrary = errors.New("loader: a zero Library knows no library to load (use Default, NVML or New)")
	// errZeroProc is the resolution of a Proc that no Library declared.
	errZeroProc = errors.New("a zero Proc belongs to no library (use Library.NewProc)")
)

// LoadError says why a library could not be opened: every path tried and the reason for
// each.
type LoadError struct {
	// Library is what could not be loaded, as messages name it: "CUDA driver" (also when
	// empty) or "NVML library".
	Library string
	Tried   []string // paths or names, in order
	// Reasons holds, for each entry of Tried, the dlerror or Windows error text, or why the
	// path was refused before it reached the system loader ("not a regular file: ...").
	Reasons []string
	// Platform is set when this operating system has no NVIDIA driver; Tried is then empty.
	Platform string
}

func (e *LoadError) Error() string {
	what := e.Library
	if what == "" {
		what = "CUDA driver"
	}
	if e.Platform != "" {
		return "loader: no " + what + " on this platform (" + e.Platform + ")"
	}
	var b strings.Builder
	b.WriteString("loader: cannot load the " + what + ":")
	for i, p := range e.Tried {
		if i > 0 {
			b.WriteString(";")
		}
		reason := "?"
		if i < len(e.Reasons) {
			reason = e.Reasons[i]
		}
		fmt.Fprintf(&b, " %s: %s", p, reason)
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
	// The Proc does not keep it: its next use asks the library again.
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
	notSupported := strings.TrimPrefix(ErrNotSupported.Error(), "loader: ")
	switch {
	case e.Status == VersionNotSufficient:
		return fmt.Sprintf("loader: %s: driver has no version %d of this symbol: %s", e.Name, e.Version, notSupported)
	case e.Status == DriverNotLoaded:
		return fmt.Sprintf("loader: %s: %v", e.Name, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("loader: %s: symbol not found (%v): %s", e.Name, e.Err, notSupported)
	}
	return fmt.Sprintf("loader: %s: symbol not found: %s", e.Name, notSupported)
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
