// Package backend is how every command of this module (cmd/vmmprobe, the examples,
// bench/grow) picks the vmm.Backend it runs on: the --backend and --preset flags, their
// checks, opening what they name, and the one-word spec from which a child process opens
// the same backend. Each command keeps its own exit codes and message prefix; the flags,
// their meaning and the wording of their errors are the same everywhere.
package backend

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
)

// The kinds --backend accepts.
const (
	Auto = "auto" // the real driver when it can be used, else (where the command allows) sim
	CUDA = "cuda" // the real driver
	Sim  = "sim"  // the simulator
)

// Choice is what --backend and --preset say.
type Choice struct {
	Kind string // Auto, CUDA or Sim
	// Preset is the sim preset: the one named, or after Check the command's default.
	Preset string

	defaultPreset string
}

// Register adds --backend and --preset to fs with the command's defaults.
func (c *Choice) Register(fs *flag.FlagSet, defaultKind, defaultPreset string) {
	c.defaultPreset = defaultPreset
	fs.StringVar(&c.Kind, "backend", defaultKind,
		"`backend`: auto (the real driver when it loads, else the simulator where the\n"+
			"command allows), cuda or sim")
	fs.StringVar(&c.Preset, "preset", "", "sim `preset` (default "+defaultPreset+"):"+lines(sim.Presets(), 80))
}

// lines lists words after a colon, comma-separated, a new line before one that would
// pass width, so that help stays within a terminal's width.
func lines(words []string, width int) string {
	var b strings.Builder
	col := width
	for i, w := range words {
		sep := " "
		if i > 0 {
			b.WriteString(",")
		}
		if col+len(w)+2 > width {
			sep, col = "\n", 0
		}
		b.WriteString(sep + w)
		col += len(w) + 2
	}
	return b.String()
}

// UsageError is a --backend or --preset value that cannot be used; its message names the
// flag and the value as the user gave them.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Check validates the choice after parsing, fills in the default preset, and returns a
// *UsageError for a value that cannot be used.
func (c *Choice) Check() error {
	switch c.Kind {
	case Auto, CUDA, Sim:
	default:
		return &UsageError{fmt.Sprintf("--backend %q: want auto, cuda or sim", c.Kind)}
	}
	if c.Preset == "" {
		c.Preset = c.defaultPreset
		return nil
	}
	if c.Kind == CUDA {
		return &UsageError{fmt.Sprintf("--preset %q: applies to --backend=sim (and auto's fallback), not --backend=cuda", c.Preset)}
	}
	if _, ok := sim.Preset(c.Preset); !ok {
		return &UsageError{fmt.Sprintf("--preset %q: no such sim preset (known: %s)", c.Preset, strings.Join(sim.Presets(), ", "))}
	}
	return nil
}

// Fallback says when Auto may run on the simulator instead of the real driver.
type Fallback int

const (
	// NoFallback: Auto is the real driver or an error.
	NoFallback Fallback = iota
	// FallbackNoDriver: Auto falls back when the driver library cannot be loaded. A
	// driver that loads and then fails (cuInit refuses, no device) is this node's answer
	// and is returned as the error.
	FallbackNoDriver
	// FallbackUnusable: Auto falls back whenever the real driver cannot run anything: it
	// does not load, cuInit fails, or it has no device.
	FallbackUnusable
)

// Opened is an opened backend and how it came to be chosen.
type Opened struct {
	Backend vmm.Backend
	// Sim is the simulator (nil for the real driver) and Config what it simulates.
	Sim    *sim.Sim
	Config sim.Config
	// FellBack is why Auto runs on the simulator (nil when it does not).
	FellBack error
}

// Simulated reports whether the backend is the simulator.
func (o *Opened) Simulated() bool { return o.Config.Name != "" || o.Sim != nil }

// Spec names the backend for a child process that must open the same one: "cuda" or
// "sim:PRESET". A Config adjusted by Opener.Tune is not carried: the child opens the preset.
func (o *Opened) Spec() string {
	if o.Simulated() {
		return Sim + ":" + o.Config.Name
	}
	return CUDA
}

// Opener opens backends. Its zero value opens the real ones; tests replace the functions
// to act out a machine without a driver or a simulator with faults armed.
type Opener struct {
	// CUDA opens the real driver (default vmm.CUDA).
	CUDA func() (vmm.Backend, error)
	// Sim builds the simulator of cfg (default sim.New).
	Sim func(cfg sim.Config) (vmm.Backend, error)
	// Tune adjusts a preset's configuration before the simulator is built (bench/grow's
	// --sim-mem); an error it returns is returned as is.
	Tune func(cfg *sim.Config) error
}

// Open opens the backend c names (c must have passed Check); fb says when Auto may fall
// back to the simulator. The errors of the real driver are returned as they are: match
// them with IsNoDriver and errors.Is(err, cu.ERROR_NO_DEVICE).
func (o Opener) Open(c Choice, fb Fallback) (*Opened, error) {
	if c.Kind == Sim {
		return o.openSim(c.Preset)
	}
	b, err := o.openCUDA(fb == FallbackUnusable)
	if err == nil {
		return &Opened{Backend: b}, nil
	}
	if c.Kind == Auto && (fb == FallbackUnusable || fb == FallbackNoDriver && IsNoDriver(err)) {
		op, serr := o.openSim(c.Preset)
		if serr != nil {
			return nil, serr
		}
		op.FellBack = err
		return op, nil
	}
	return nil, err
}

// openCUDA opens the real driver; with needDevice, a driver without a device is an error
// (cu.ERROR_NO_DEVICE), as cuInit's own CUDA_ERROR_NO_DEVICE is.
func (o Opener) openCUDA(needDevice bool) (vmm.Backend, error) {
	open := o.CUDA
	if open == nil {
		open = vmm.CUDA
	}
	b, err := open()
	if err != nil || !needDevice {
		return b, err
	}
	n, err := b.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &cu.Error{Op: "cuDeviceGetCount", Err: cu.ERROR_NO_DEVICE}
	}
	return b, nil
}

func (o Opener) openSim(preset string) (*Opened, error) {
	cfg, ok := sim.Preset(preset)
	if !ok {
		return nil, &UsageError{fmt.Sprintf("--preset %q: no such sim preset (known: %s)", preset, strings.Join(sim.Presets(), ", "))}
	}
	if o.Tune != nil {
		if err := o.Tune(&cfg); err != nil {
			return nil, err
		}
	}
	build := o.Sim
	if build == nil {
		build = func(cfg sim.Config) (vmm.Backend, error) { return sim.New(cfg) }
	}
	b, err := build(cfg)
	if err != nil {
		return nil, err
	}
	s, _ := b.(*sim.Sim)
	return &Opened{Backend: b, Sim: s, Config: cfg}, nil
}

// OpenSpec opens the backend a Spec names, for a child process: never a fallback.
func (o Opener) OpenSpec(spec string) (*Opened, error) {
	if spec == CUDA {
		return o.Open(Choice{Kind: CUDA}, NoFallback)
	}
	if preset, ok := strings.CutPrefix(spec, Sim+":"); ok {
		return o.openSim(preset)
	}
	return nil, fmt.Errorf("backend spec %q: want %s or %s:PRESET", spec, CUDA, Sim)
}

// IsNoDriver reports whether err says that the driver library could not be loaded at all
// (as opposed to a driver that loaded and then refused).
func IsNoDriver(err error) bool { return errors.Is(err, loader.ErrNoDriver) }
