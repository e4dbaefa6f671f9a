package sim_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/stretchr/testify/require"
)

// A zero Sim fails clearly, as a driver before cuInit does: every method, given zero
// arguments, returns without a panic or a hang, twice (a first call must not leave the
// Sim locked), and what returns an error names CUDA_ERROR_NOT_INITIALIZED or the argument.
func TestZeroSim(t *testing.T) {
	var s sim.Sim
	v := reflect.ValueOf(&s)
	for i := range v.NumMethod() {
		m, name := v.Method(i), v.Type().Method(i).Name
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			args[j] = reflect.Zero(m.Type().In(j))
		}
		if m.Type().IsVariadic() {
			args = args[:len(args)-1]
		}
		for range 2 {
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				m.Call(args)
			}()
			select {
			case p := <-done:
				require.Nil(t, p, "%s panicked", name)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s still blocked after 5 s", name)
			}
		}
	}
	_, err := s.Reserve(2<<20, 0, 0, 0)
	require.ErrorIs(t, err, cu.ERROR_NOT_INITIALIZED)
}

// SetCapacity(dev, 0) caps the device at nothing.
func TestSetCapacityZero(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	require.NoError(t, s.SetCapacity(0, 0))
	_, err = s.Create(2<<20, &cu.MemAllocationProp{Type: cu.MEM_ALLOCATION_TYPE_PINNED, Location: cu.MemLocation{Type: cu.MEM_LOCATION_TYPE_DEVICE}}, 0)
	require.ErrorIs(t, err, cu.ERROR_OUT_OF_MEMORY)
}
