package main

import (
	"errors"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/vmm"
)

// symbolReport says which VMM and multicast driver entry points resolved.
type symbolReport struct {
	VMM       symbolSet `json:"vmm"`
	Multicast symbolSet `json:"multicast"`
}

type symbolSet struct {
	Resolved []string        `json:"resolved"`
	Missing  []missingSymbol `json:"missing"`
}

type missingSymbol struct {
	Name string `json:"name"`
	// Version is the CUDA ABI version cuvmm asks for (12010 for multicast).
	Version int `json:"version"`
	// Reason is "not found" (the driver does not have it) or "version not sufficient" (it
	// has only an older ABI).
	Reason string `json:"reason"`
}

// complete reports whether every symbol of the set resolved.
func (s symbolSet) complete() bool { return len(s.Missing) == 0 }

// symbolKind sorts a driver entry point into "vmm", "multicast" or "" (neither). dma-buf
// export (cuMemGetHandleForAddressRange, CUDA 11.7) is not part of VMM itself: a driver
// without it still does everything else, so it does not make the VMM set incomplete. Nor
// do the optional symbols (cu.OptionalSymbol: CUDA 13.1's multicast binds), which cu uses
// only where the driver has them.
func symbolKind(s loader.Symbol) string {
	switch {
	case s.Name == "cuMemGetHandleForAddressRange", cu.OptionalSymbol(s.Name):
		return ""
	case strings.HasPrefix(s.Name, "cuMulticast"):
		return "multicast"
	case strings.HasPrefix(s.Name, "cuMem") && s.Version >= 10020:
		return "vmm"
	}
	return ""
}

// symbolsOf lists the VMM and multicast entry points that cu declares and whether b
// provides each. Only the real driver is asked (through cu.Symbols); a simulated backend
// is asked through simSymbols, which returns nil when the simulator cannot say.
func symbolsOf(b vmm.Backend) *symbolReport {
	var resolve func(loader.Symbol) error // nil: b provides the entry point
	if b.Name() == "cuda" {
		found := map[string]error{}
		for _, p := range cu.Symbols() {
			found[p.Symbol().Name] = p.Find()
		}
		resolve = func(s loader.Symbol) error { return found[s.Name] }
	} else if resolve = simSymbols(b); resolve == nil {
		return nil
	}
	r := &symbolReport{VMM: symbolSet{Resolved: []string{}, Missing: []missingSymbol{}},
		Multicast: symbolSet{Resolved: []string{}, Missing: []missingSymbol{}}}
	for _, p := range cu.Symbols() {
		s := p.Symbol()
		var set *symbolSet
		switch symbolKind(s) {
		case "vmm":
			set = &r.VMM
		case "multicast":
			set = &r.Multicast
		default:
			continue
		}
		if err := resolve(s); err != nil {
			set.Missing = append(set.Missing, missingSymbol{Name: s.Name, Version: s.Version, Reason: symbolReason(err)})
		} else {
			set.Resolved = append(set.Resolved, s.Name)
		}
	}
	return r
}

func symbolReason(err error) string {
	var se *loader.SymbolError
	if errors.As(err, &se) {
		switch se.Status {
		case loader.SymbolNotFound:
			return "not found"
		case loader.VersionNotSufficient:
			return "version not sufficient"
		case loader.DriverNotLoaded:
			return "driver not loaded"
		}
	}
	return err.Error()
}
