package main

import (
	"errors"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/internal/pattern"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testNow is the time every test document is generated at, so that golden files hold still.
var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// gatherSim builds the report of a simulator as vmmprobe does for --backend=sim.
func gatherSim(t *testing.T, s *sim.Sim, command string) *document {
	t.Helper()
	cfg := s.Config()
	sel := &opened{b: s, cfg: cfg, childSpec: "sim:" + cfg.Name, info: backendInfo{Name: "sim", Simulated: true, Preset: cfg.Name}}
	doc, err := gather(sel, simSystem(cfg), command, programInfo{Version: "test"}, testNow)
	require.NoError(t, err)
	return doc
}

func newSim(t *testing.T, preset string) *sim.Sim {
	t.Helper()
	cfg, ok := sim.Preset(preset)
	require.True(t, ok)
	s, err := sim.New(cfg)
	require.NoError(t, err)
	return s
}

// TestChecksLeakNothing runs every check on each preset and proves that nothing stays
// allocated, reserved, mapped or bound afterwards.
func TestChecksLeakNothing(t *testing.T) {
	for _, preset := range sim.Presets() {
		t.Run(preset, func(t *testing.T) {
			t.Parallel()
			cfg, _ := sim.Preset(preset)
			s, err := sim.New(cfg)
			if errors.Is(err, cu.ERROR_SYSTEM_NOT_READY) {
				t.Skip("cuInit refuses on this node: nothing to check")
			}
			require.NoError(t, err)
			doc := gatherSim(t, s, cmdCheck)
			runChecks(s, doc, checkOptions{childSpec: "sim:" + preset})
			assert.Zero(t, doc.Summary.Failed, "%+v", doc.Checks)
			st := s.Stats()
			assert.True(t, st.Clean(), "%+v", st)
		})
	}
}

// TestFabricNeedsIMEX: the device attribute says fabric handles are supported on H100 and
// HGX, but without an IMEX channel creating one is not permitted: unsupported, with the
// IMEX remedy. With a channel (MNNVL) it works.
func TestFabricNeedsIMEX(t *testing.T) {
	t.Parallel()
	for preset, want := range map[string]string{"h100": statusUnsupported, "hgx8": statusUnsupported, "mnnvl": statusOK, "workstation": statusUnsupported} {
		s := newSim(t, preset)
		doc := gatherSim(t, s, cmdCheck)
		runChecks(s, doc, checkOptions{childSpec: "sim:" + preset})
		for _, c := range doc.Checks {
			if c.Check != "fabric" {
				continue
			}
			assert.Equal(t, want, c.Status, preset)
			if preset == "h100" {
				assert.Equal(t, "CUDA_ERROR_NOT_PERMITTED", c.Result)
				assert.Contains(t, c.Detail, "attribute says fabric handles are supported")
				assert.Contains(t, c.Remedy, "create channel 0, or load the nvidia module with NVreg_CreateImexChannel0=1")
				assert.NotContains(t, c.Remedy, "mknod", "no command for a simulated node")
			}
		}
	}
}

// TestMulticastNotExercisedByDefault: without the opt-in, no multicast object is created.
func TestMulticastNotExercisedByDefault(t *testing.T) {
	t.Parallel()
	s := newSim(t, "hgx8")
	doc := gatherSim(t, s, cmdCheck)
	runChecks(s, doc, checkOptions{childSpec: "sim:hgx8"})
	assert.Zero(t, s.Stats().Calls["MulticastCreate"])
	last := doc.Checks[len(doc.Checks)-1]
	assert.Equal(t, "multicast", last.Check)
	assert.Equal(t, statusSkipped, last.Status)
	assert.Contains(t, last.Detail, "not exercised")
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, last.Devices)
}

// TestExerciseMulticastOnSim drives the opt-in multicast exercise directly, on the
// simulator only (no test passes --unsafe-multicast: on a real machine it would create a
// multicast object).
func TestExerciseMulticastOnSim(t *testing.T) {
	s := newSim(t, "hgx8")
	doc := gatherSim(t, s, cmdReport)
	step, err := exerciseMulticast(vmm.New(s), doc.Devices, []int{0, 1, 2, 3})
	require.NoError(t, err, step)
	assert.Equal(t, uint64(1), s.Stats().Calls["MulticastCreate"])
	assert.True(t, s.Stats().Clean(), "%+v", s.Stats())

	require.NoError(t, s.FailNth(sim.OpMulticastBindMem, 2, cu.ERROR_OUT_OF_MEMORY))
	step, err = exerciseMulticast(vmm.New(s), doc.Devices, []int{0, 1, 2, 3})
	assert.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
	assert.Equal(t, "bind memory of device 1", step)
	assert.True(t, s.Stats().Clean(), "torn down after a failure: %+v", s.Stats())
}

func TestPeerUnsupported(t *testing.T) {
	cfg, _ := sim.Preset("hgx8")
	cfg.Devices = cfg.Devices[:2]
	cfg.PeerAccess = [][]bool{{false, false}, {false, false}}
	s, err := sim.New(cfg)
	require.NoError(t, err)
	doc := gatherSim(t, s, cmdCheck)
	runChecks(s, doc, checkOptions{childSpec: "sim:hgx8"})
	n := 0
	for _, c := range doc.Checks {
		if c.Check == "peer-map" {
			n++
			assert.Equal(t, statusUnsupported, c.Status, "%+v", c)
			assert.Contains(t, c.Remedy, "check the topology and NVLink state")
			assert.Contains(t, checkFix("peer-map", c, doc.Devices[0]).text(false), "(nvidia-smi topo -m; nvidia-smi nvlink -s)", "the command, on a real node")
		}
	}
	assert.Equal(t, 2, n)
	assert.True(t, s.Stats().Clean())
}

func TestPattern(t *testing.T) {
	a, b := pattern.Bytes(1, 4096), pattern.Bytes(2, 4096)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, pattern.Bytes(1, 4096))
	assert.NoError(t, compare(a, a))
	c := append([]byte(nil), a...)
	c[100]++
	assert.ErrorIs(t, compare(c, a), errMismatch)
	assert.ErrorContains(t, compare(c, a), "byte 100 of 4096")
}

// TestChecksLeakNothingOnFailure: every step that can fail leaves nothing behind.
func TestChecksLeakNothingOnFailure(t *testing.T) {
	for _, op := range []sim.Op{sim.OpCreate, sim.OpReserve, sim.OpMap, sim.OpSetAccess, sim.OpCopyHtoD, sim.OpCopyDtoH, sim.OpExportFD, sim.OpExportFabric, sim.OpProperties} {
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			for _, n := range []int{1, 2, 3} {
				// One GPU of the MNNVL tray: it has every feature, fabric handles included.
				cfg, _ := sim.Preset("mnnvl")
				cfg.Devices = cfg.Devices[:1]
				s, err := sim.New(cfg)
				require.NoError(t, err)
				require.NoError(t, s.FailNth(op, n, cu.ERROR_UNKNOWN))
				doc := gatherSim(t, s, cmdCheck)
				runChecks(s, doc, checkOptions{childSpec: "sim:mnnvl"})
				if n == 1 {
					assert.Equal(t, 1, doc.Summary.Failed, "%s #%d", op, n)
				} else {
					assert.LessOrEqual(t, doc.Summary.Failed, 1, "%s #%d", op, n)
				}
				assert.True(t, s.Stats().Clean(), "%s #%d: %+v", op, n, s.Stats())
			}
		})
	}
}

// TestChildCannotOpenBackend: a child that fails reports why, and the check fails.
func TestChildCannotOpenBackend(t *testing.T) {
	if !ipcSupported {
		t.Skip("no cross-process check here")
	}
	s := newSim(t, "hgx8")
	doc := gatherSim(t, s, cmdCheck)
	runChecks(s, doc, checkOptions{childSpec: "sim:no-such-preset"})
	n := 0
	for _, c := range doc.Checks {
		if c.Check == "posix-fd-ipc" {
			n++
			assert.Equal(t, statusFailed, c.Status)
			assert.Equal(t, "the child process failed at open backend", c.Detail)
			assert.Contains(t, c.Error, "no-such-preset")
		}
	}
	assert.Equal(t, 8, n, "one attempt per device")
	assert.True(t, s.Stats().Clean())
}
