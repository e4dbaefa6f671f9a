package sim_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
	"github.com/cuvmm/cuvmm/sim"
	"github.com/cuvmm/cuvmm/vmm"
	"github.com/stretchr/testify/require"
)

// The operations FailNth takes, and the names Stats.Calls counts them under, are
// vmm.Backend's methods: a method added to or renamed in the interface must be added to or
// renamed in sim's operations too (faults.go), and the compiler, which makes Sim implement
// the interface, does not check that.

// backendOps returns the vmm.Backend methods that are driver operations: all but Name.
func backendOps() []string {
	t := reflect.TypeFor[vmm.Backend]()
	var ops []string
	for i := range t.NumMethod() {
		if m := t.Method(i).Name; m != "Name" {
			ops = append(ops, m)
		}
	}
	return ops
}

func TestOpsAreTheBackendMethods(t *testing.T) {
	want := backendOps()
	var got []string
	for _, op := range sim.Ops() {
		got = append(got, op.String())
	}
	slices.Sort(got)
	require.Equal(t, want, got, "sim.Ops() (faults.go's opNames) and vmm.Backend's methods differ")
}

// Every method counts itself, and fails with a fault armed, under its own name and no
// other: a method wired to another's operation would count and fail as that one.
func TestEachMethodCountsAndFailsUnderItsName(t *testing.T) {
	s, err := sim.New(sim.PresetH100())
	require.NoError(t, err)
	v := reflect.ValueOf(vmm.Backend(s))
	for _, o := range sim.Ops() {
		op := o.String()
		m := v.MethodByName(op)
		args := make([]reflect.Value, m.Type().NumIn())
		for i := range args {
			args[i] = reflect.Zero(m.Type().In(i)) // nil properties, handle 0: a fault comes first
		}
		before := s.Stats().Calls
		require.NoError(t, s.FailNth(o, 1, cu.ERROR_UNKNOWN))
		out := m.Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		require.ErrorIs(t, err, cu.ERROR_UNKNOWN, "%s: the fault armed for %s did not make it fail", op, op)
		s.ClearFaults()

		after := s.Stats().Calls
		for name, n := range after {
			want := before[name]
			if name == op {
				want++
			}
			require.Equal(t, want, n, "calling %s counted %s", op, name)
		}
		require.Contains(t, after, op, "calling %s did not count it", op)
	}
}
