package main

import (
	"errors"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/backend"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// defaultPreset is the sim preset of --backend=sim without --preset, and of auto's fallback.
const defaultPreset = "h200"

// opened is the backend vmmprobe runs on, with what the report says about it. Backend is
// nil when the driver loaded but could not be initialized (initErr): the report then
// carries what can be known without it.
type opened struct {
	b    vmm.Backend
	info backendInfo
	// childSpec is how a child process opens the same backend.
	childSpec string
	// cfg is the simulated machine (Name "" for the real driver).
	cfg sim.Config
	// initErr is why the driver, which loaded, could not be used (cuInit's error).
	initErr error
}

// backend is the opened backend, nil for none.
func (o *opened) backend() vmm.Backend {
	if o == nil {
		return nil
	}
	return o.b
}

// open opens the backend c names; an error comes with the exit code it means. fallback lets auto fall back to sim when the driver
// library does not load (the table output only). A driver that loads and then refuses
// (cuInit fails: Fabric Manager down is CUDA_ERROR_SYSTEM_NOT_READY) is not an error here:
// the report is still written, with the reason, because the node picture says why.
func open(o backend.Opener, c backend.Choice, fallback bool) (*opened, int, error) {
	fb := backend.NoFallback
	if fallback {
		fb = backend.FallbackNoDriver
	}
	op, err := o.Open(c, fb)
	switch {
	case err == nil:
	case backend.IsNoDriver(err):
		return nil, exitNoDriver, err
	case errors.Is(err, cu.ERROR_NO_DEVICE):
		return nil, exitNoDevice, err
	case errors.As(err, new(*backend.UsageError)):
		return nil, exitUsage, err
	default:
		// cuInit (or the simulator standing in for it) refused.
		sel := &opened{initErr: err, childSpec: backend.CUDA, info: backendInfo{Name: backend.CUDA, InitError: errText(err)}}
		if c.Kind == backend.Sim {
			cfg, _ := sim.Preset(c.Preset)
			sel.cfg = cfg
			sel.childSpec = backend.Sim + ":" + cfg.Name
			sel.info = backendInfo{Name: backend.Sim, Simulated: true, Preset: cfg.Name, InitError: errText(err)}
		} else {
			sel.info.LibraryPath = cu.LibraryPath()
		}
		return sel, exitOK, nil
	}
	sel := &opened{b: op.Backend, childSpec: op.Spec(), cfg: op.Config}
	if op.Simulated() {
		sel.info = backendInfo{Name: op.Backend.Name(), Simulated: true, Preset: op.Config.Name}
		if op.FellBack != nil {
			sel.info.Fallback = driverReason(op.FellBack)
		}
	} else {
		sel.info = backendInfo{Name: op.Backend.Name(), LibraryPath: cu.LibraryPath()}
	}
	return sel, exitOK, nil
}

// simSymbols says which driver entry points a simulator provides: those whose ABI version
// its configured driver version reaches (sim has no list of its own). Nil for other
// backends.
func simSymbols(b vmm.Backend) func(loader.Symbol) error {
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
