// Package vmmtest is the conformance suite of vmm.Backend implementations: it drives a
// backend through the whole VMM API, happy paths with data checks and every error case we
// know of, and asserts the results the real driver returned when the suite was recorded on
// a real GPU (testdata/expectations.json, with the driver version and device it came from).
//
// Any backend must pass it with no per-backend expectations: differences between machines
// are declared as [Capabilities] (multicast, fabric handles, several devices) and the cases
// that need a capability are skipped without it. A backend that knowingly returns something
// else than the driver in a recorded case declares it, with why, in
// [Capabilities].Deviations; the suite checks each declaration. Cases no GPU has recorded
// yet ([Expectations].Unrecorded) are logged, not asserted.
//
// Use it from a test of your own backend:
//
//	func openBackend() (vmm.Backend, error) { return mybackend.New() }
//
//	func TestMain(m *testing.M) {
//		vmmtest.RunChildIfRequested(openBackend) // the cross-process case re-executes the test binary
//		os.Exit(m.Run())
//	}
//
//	func TestConformance(t *testing.T) {
//		vmmtest.Run(t, func(t testing.TB) vmm.Backend {
//			b, err := openBackend()
//			if err != nil {
//				t.Fatal(err)
//			}
//			return b
//		}, vmmtest.Capabilities{CrossProcess: true})
//	}
//
// The cross-process case starts the test binary again as a child. Where the test binary runs
// under an emulator the kernel does not start by itself (go test -exec qemu-aarch64-static),
// set CUVMM_EXEC_RUNNER to the emulator's path so that the child runs under it too.
//
// To record new expectations on a real GPU, set CUVMM_VMMTEST_RECORD to a file path: the
// suite then writes what the backend returned instead of asserting it, keeping what the file
// already holds for the cases it did not run (results, the note, and unrecorded cases). The
// walk/, faults/ and dangerous/ groups run only with Capabilities.Dangerous.
package vmmtest
