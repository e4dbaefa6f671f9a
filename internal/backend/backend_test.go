package backend

import (
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/loader"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, defKind string, args ...string) (Choice, error) {
	t.Helper()
	var c Choice
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Register(fs, defKind, "h200")
	require.NoError(t, fs.Parse(args))
	return c, c.Check()
}

func TestCheck(t *testing.T) {
	c, err := parse(t, Auto)
	require.NoError(t, err)
	assert.Equal(t, Choice{Kind: Auto, Preset: "h200", defaultPreset: "h200"}, c, "the default preset is filled in")

	c, err = parse(t, CUDA, "--backend=sim", "--preset=HGX8")
	require.NoError(t, err)
	assert.Equal(t, "HGX8", c.Preset, "presets are case-insensitive, kept as given")

	for args, want := range map[[2]string]string{
		{"--backend=rocm", ""}:                  `--backend "rocm": want auto, cuda or sim`,
		{"--backend=sim", "--preset=a100"}:      `--preset "a100": no such sim preset (known: `,
		{"--backend=cuda", "--preset=h100"}:     `--preset "h100": applies to --backend=sim (and auto's fallback), not --backend=cuda`,
		{"--backend=auto", "--preset=nothing"}:  `--preset "nothing": no such sim preset`,
		{"--backend=", "--preset=h100"}:         `--backend "": want auto, cuda or sim`,
		{"--backend=SIM", "--preset=workspace"}: `--backend "SIM"`,
	} {
		a := args[:]
		if a[1] == "" {
			a = a[:1]
		}
		_, err := parse(t, Auto, a...)
		var ue *UsageError
		require.ErrorAs(t, err, &ue, "%v", args)
		assert.Contains(t, err.Error(), want, "%v", args)
	}
}

var noDriver = func() (vmm.Backend, error) {
	return nil, &loader.LoadError{Tried: []string{"libcuda.so.1"}, Reasons: []string{"cannot open shared object file"}}
}

var notReady = func() (vmm.Backend, error) {
	return nil, &cu.Error{Op: "cuInit", Err: cu.ERROR_SYSTEM_NOT_READY}
}

// zero is a driver that loads and has no device.
type zero struct{ vmm.Backend }

func (zero) DeviceCount() (int, error) { return 0, nil }

func TestOpenFallback(t *testing.T) {
	h200 := func() (vmm.Backend, error) {
		s, err := sim.New(sim.PresetH200())
		return zero{s}, err
	}
	auto := Choice{Kind: Auto, Preset: "hgx8"}
	for _, tc := range []struct {
		name     string
		cuda     func() (vmm.Backend, error)
		fb       Fallback
		fellBack bool
		err      error
	}{
		{"no driver, no fallback", noDriver, NoFallback, false, loader.ErrNoDriver},
		{"no driver falls back", noDriver, FallbackNoDriver, true, nil},
		{"cuInit refuses: the node's answer", notReady, FallbackNoDriver, false, cu.ERROR_SYSTEM_NOT_READY},
		{"cuInit refuses, unusable falls back", notReady, FallbackUnusable, true, nil},
		{"no device: the node's answer", h200, FallbackNoDriver, false, nil},
		{"no device, unusable falls back", h200, FallbackUnusable, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, err := Opener{CUDA: tc.cuda}.Open(auto, tc.fb)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Nil(t, op)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.fellBack, op.FellBack != nil)
			if tc.fellBack {
				assert.True(t, op.Simulated())
				assert.Equal(t, "sim:hgx8", op.Spec())
				require.NotNil(t, op.Sim)
				assert.Equal(t, "hgx8", op.Config.Name)
			} else {
				assert.Equal(t, "cuda", op.Spec(), "a driver without a device is still the driver")
			}
		})
	}
	// With --backend=cuda nothing falls back, and "no device" is an error under FallbackUnusable.
	_, err := Opener{CUDA: h200}.Open(Choice{Kind: CUDA}, FallbackUnusable)
	assert.ErrorIs(t, err, cu.ERROR_NO_DEVICE)
	_, err = Opener{CUDA: noDriver}.Open(Choice{Kind: CUDA}, FallbackUnusable)
	assert.True(t, IsNoDriver(err))
	assert.False(t, IsNoDriver(&cu.Error{Op: "cuInit", Err: cu.ERROR_SYSTEM_NOT_READY}))
}

func TestOpenSimTuneAndSpec(t *testing.T) {
	tuned := errors.New("tuned away")
	o := Opener{Tune: func(cfg *sim.Config) error {
		cfg.Devices[0].TotalMem = 4 << 30
		return nil
	}}
	op, err := o.Open(Choice{Kind: Sim, Preset: "h100"}, NoFallback)
	require.NoError(t, err)
	info, err := op.Backend.Device(0)
	require.NoError(t, err)
	assert.Equal(t, uint64(4<<30), info.TotalMem)
	assert.Equal(t, "sim:h100", op.Spec())

	_, err = Opener{Tune: func(*sim.Config) error { return tuned }}.Open(Choice{Kind: Sim, Preset: "h100"}, NoFallback)
	assert.ErrorIs(t, err, tuned)

	child, err := Opener{}.OpenSpec(op.Spec())
	require.NoError(t, err)
	assert.Equal(t, "h100", child.Config.Name)
	_, err = Opener{CUDA: noDriver}.OpenSpec("cuda")
	assert.True(t, IsNoDriver(err))
	for _, bad := range []string{"", "sim:", "sim:nope", "rocm", "sim"} {
		_, err := Opener{}.OpenSpec(bad)
		assert.Error(t, err, bad)
	}
}
