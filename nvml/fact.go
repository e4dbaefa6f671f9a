package nvml

import "fmt"

// Fact is one thing the probe learned: a value NVML reported, or why it is unknown. It is
// plain data, so a simulator or a test can make one with Known and Unknown.
type Fact[T any] struct {
	Value T
	// Why is "" when Value is known; otherwise the reason, such as
	// "nvml: nvmlDeviceGetGpuFabricInfoV(device 0): NVML_ERROR_NOT_SUPPORTED: ...".
	Why string
	// Code is the NVML result behind Why: ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND for
	// a missing entry point, ERROR_LIBRARY_NOT_FOUND for a missing library, or another.
	// SUCCESS when Value is known, or when the reason is not an NVML result.
	Code Return
}

// Known returns a known fact.
func Known[T any](v T) Fact[T] { return Fact[T]{Value: v} }

// Unknown returns a fact that is unknown because of err, with the NVML result err holds as
// its Code.
func Unknown[T any](err error) Fact[T] {
	if err == nil {
		return Fact[T]{Why: "unknown"}
	}
	r, _ := ReturnOf(err)
	return Fact[T]{Why: err.Error(), Code: r}
}

// Known reports whether f holds a value.
func (f Fact[T]) Known() bool { return f.Why == "" }

// String is the value, or "unknown (why)".
func (f Fact[T]) String() string {
	if f.Known() {
		return fmt.Sprint(f.Value)
	}
	return "unknown (" + f.Why + ")"
}
