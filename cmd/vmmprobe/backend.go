package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// defaultPreset is the sim preset of --backend=sim without --preset, and of auto's fallback.
const defaultPreset = "h200"

// Backend kinds of --backend.
const (
	backendAuto = "auto"
	backendCUDA = "cuda"
	backendSim  = "sim"
)

// openers open the backends; tests replace cuda to act out a machine without a driver.
type openers struct {
	cuda func() (vmm.Backend, error)
	sim  func(preset string) (vmm.Backend, sim.Config, error)
}

var defaultOpeners = openers{cuda: vmm.CUDA, sim: openSim}

// errUnknownPreset is a --preset that sim does not know (a usage error).
var errUnknownPreset = errors.New("unknown sim preset")

func openSim(preset string) (vmm.Backend, sim.Config, error) {
	cfg, ok := sim.Preset(preset)
	if !ok {
		return nil, sim.Config{}, fmt.Errorf("%w %q (known: %s)", errUnknownPreset, preset, strings.Join(sim.Presets(), ", "))
	}
	s, err := sim.New(cfg)
	if err != nil {
		return nil, sim.Config{}, err
	}
	return s, cfg, nil
}

// selection is an opened backend with what the report says about it.
type selection struct {
	b    vmm.Backend
	info backendInfo
	// childSpec is how a child process opens the same backend.
	childSpec string
}

// openError is a backend that could not be opened, with the exit code it means.
type openError struct {
	code int
	err  error
}

func (e *openError) Error() string { return e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

// open selects the backend: kind is auto, cuda or sim; preset names the sim preset ("" for
// the default); fallback allows auto to fall back to sim when the driver does not load
// (the table output only). notice receives the one-line fallback notice.
func (o openers) open(kind, preset string, fallback bool, notice func(string)) (*selection, error) {
	if kind == backendSim {
		return o.openSim(preset, "")
	}
	b, err := o.cuda()
	if err == nil {
		return &selection{b: b, childSpec: backendCUDA,
			info: backendInfo{Name: b.Name(), LibraryPath: cu.LibraryPath()}}, nil
	}
	code := exitNoDriver
	if errors.Is(err, cu.ERROR_NO_DEVICE) {
		// The driver loaded and says there is no device: that is this node's answer.
		code = exitNoDevice
	}
	if kind == backendAuto && fallback && code == exitNoDriver {
		sel, serr := o.openSim(preset, errText(err))
		if serr != nil {
			return nil, serr
		}
		notice(fmt.Sprintf("no CUDA driver (%s); showing the simulated %q preset instead", oneLine(errText(err)), sel.info.Preset))
		return sel, nil
	}
	return nil, &openError{code: code, err: err}
}

func (o openers) openSim(preset, fallbackReason string) (*selection, error) {
	if preset == "" {
		preset = defaultPreset
	}
	b, cfg, err := o.sim(preset)
	if err != nil {
		code := exitNoDriver
		if errors.Is(err, errUnknownPreset) {
			code = exitUsage
		}
		return nil, &openError{code: code, err: err}
	}
	return &selection{b: b, childSpec: backendSim + ":" + cfg.Name,
		info: backendInfo{Name: b.Name(), Simulated: true, Preset: cfg.Name, Fallback: fallbackReason}}, nil
}

// openSpec opens the backend a child spec names: "cuda" or "sim:PRESET".
func (o openers) openSpec(spec string) (vmm.Backend, error) {
	if spec == backendCUDA {
		return o.cuda()
	}
	if preset, ok := strings.CutPrefix(spec, backendSim+":"); ok {
		b, _, err := o.sim(preset)
		return b, err
	}
	return nil, fmt.Errorf("unknown backend %q", spec)
}

// simIMEX is the IMEX state a simulator's configuration gives (nil for other backends).
func simIMEX(b vmm.Backend) *imexState {
	s, ok := b.(*sim.Sim)
	if !ok {
		return nil
	}
	st := &imexState{Source: "sim", Ready: s.Config().IMEX, Channels: []imexChannel{}}
	if st.Ready {
		st.Diagnosis = "simulated: the machine has an IMEX channel"
	} else {
		st.Diagnosis = "simulated: the machine has no IMEX channel"
		st.Remedy = imexCreateRemedy(imexMajorUnknown)
	}
	return st
}

// simSymbols says which driver entry points a simulator provides: those whose ABI version
// its configured driver version reaches (sim has no list of its own). Nil for other
// backends.
func simSymbols(b vmm.Backend) symbolResolver {
	s, ok := b.(*sim.Sim)
	if !ok {
		return nil
	}
	v := s.Config().DriverVersion
	return func(sym loader.Symbol) error {
		if sym.Version > v {
			return &loader.SymbolError{Name: sym.Name, Version: sym.Version, Status: loader.SymbolNotFound}
		}
		return nil
	}
}

// oneLine flattens a multi-line error for a one-line notice.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
