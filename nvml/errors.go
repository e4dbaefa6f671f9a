package nvml

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/loader"
)

// Error is the error of a failed NVML call: which call, with which arguments, and what it
// returned (a Return), or why it could not be made (the library or the entry point is
// missing).
type Error struct {
	Op   string // the NVML function, e.g. "nvmlDeviceGetGpuFabricInfoV"
	Args string // its arguments, for people; "" when it takes none worth naming
	Err  error
}

func (e *Error) Error() string {
	s := "nvml: " + e.Op
	if e.Args != "" {
		s += "(" + e.Args + ")"
	}
	if e.Err == nil {
		return s
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// unavailable is the error of a call that could not be made: the loader's error, which
// also matches the NVML result a C program would have got from a loader stub
// (NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND).
type unavailable struct {
	err error
	ret Return
}

func (e *unavailable) Error() string   { return e.err.Error() }
func (e *unavailable) Unwrap() []error { return []error{e.err, e.ret} }

// symbolErr turns the loader's error for an entry point into unavailable. For a library
// that did not load, the *LoadError says everything: the entry point's name is already the
// Op of the Error around it.
func symbolErr(err error) error {
	var se *loader.SymbolError
	if errors.As(err, &se) && se.Status == loader.DriverNotLoaded {
		if se.Err != nil {
			err = se.Err
		}
		return &unavailable{err: err, ret: ERROR_LIBRARY_NOT_FOUND}
	}
	return &unavailable{err: err, ret: ERROR_FUNCTION_NOT_FOUND}
}

// wrap names the call p of a failed call and its arguments; it is reached only on failure.
func wrap(err error, p *loader.Proc, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Op: p.Symbol().Name, Args: fmt.Sprintf(format, args...), Err: err}
}

// Return is an nvmlReturn_t, the status of every NVML call. It implements error, and a
// Return wrapped in another error still matches the constant with errors.Is.
type Return int32

// The nvmlReturn_t values of nvml.h, each named as in C less "NVML_".
const (
	SUCCESS                         Return = 0
	ERROR_UNINITIALIZED             Return = 1
	ERROR_INVALID_ARGUMENT          Return = 2
	ERROR_NOT_SUPPORTED             Return = 3
	ERROR_NO_PERMISSION             Return = 4
	ERROR_ALREADY_INITIALIZED       Return = 5
	ERROR_NOT_FOUND                 Return = 6
	ERROR_INSUFFICIENT_SIZE         Return = 7
	ERROR_INSUFFICIENT_POWER        Return = 8
	ERROR_DRIVER_NOT_LOADED         Return = 9
	ERROR_TIMEOUT                   Return = 10
	ERROR_IRQ_ISSUE                 Return = 11
	ERROR_LIBRARY_NOT_FOUND         Return = 12
	ERROR_FUNCTION_NOT_FOUND        Return = 13
	ERROR_CORRUPTED_INFOROM         Return = 14
	ERROR_GPU_IS_LOST               Return = 15
	ERROR_RESET_REQUIRED            Return = 16
	ERROR_OPERATING_SYSTEM          Return = 17
	ERROR_LIB_RM_VERSION_MISMATCH   Return = 18
	ERROR_IN_USE                    Return = 19
	ERROR_MEMORY                    Return = 20
	ERROR_NO_DATA                   Return = 21
	ERROR_VGPU_ECC_NOT_SUPPORTED    Return = 22
	ERROR_INSUFFICIENT_RESOURCES    Return = 23
	ERROR_FREQ_NOT_SUPPORTED        Return = 24
	ERROR_ARGUMENT_VERSION_MISMATCH Return = 25
	ERROR_DEPRECATED                Return = 26
	ERROR_NOT_READY                 Return = 27
	ERROR_GPU_NOT_FOUND             Return = 28
	ERROR_INVALID_STATE             Return = 29
	ERROR_RESET_TYPE_NOT_SUPPORTED  Return = 30
	ERROR_UNKNOWN                   Return = 999
)

// returns holds the C name and the header's description of each value.
var returns = map[Return][2]string{
	SUCCESS:                       {"NVML_SUCCESS", "The operation was successful"},
	ERROR_UNINITIALIZED:           {"NVML_ERROR_UNINITIALIZED", "NVML was not first initialized with nvmlInit()"},
	ERROR_INVALID_ARGUMENT:        {"NVML_ERROR_INVALID_ARGUMENT", "A supplied argument is invalid"},
	ERROR_NOT_SUPPORTED:           {"NVML_ERROR_NOT_SUPPORTED", "The requested operation is not available on target device"},
	ERROR_NO_PERMISSION:           {"NVML_ERROR_NO_PERMISSION", "The current user does not have permission for operation"},
	ERROR_ALREADY_INITIALIZED:     {"NVML_ERROR_ALREADY_INITIALIZED", "Deprecated: Multiple initializations are now allowed through ref counting"},
	ERROR_NOT_FOUND:               {"NVML_ERROR_NOT_FOUND", "A query to find an object was unsuccessful"},
	ERROR_INSUFFICIENT_SIZE:       {"NVML_ERROR_INSUFFICIENT_SIZE", "An input argument is not large enough"},
	ERROR_INSUFFICIENT_POWER:      {"NVML_ERROR_INSUFFICIENT_POWER", "A device's external power cables are not properly attached"},
	ERROR_DRIVER_NOT_LOADED:       {"NVML_ERROR_DRIVER_NOT_LOADED", "NVIDIA driver is not loaded"},
	ERROR_TIMEOUT:                 {"NVML_ERROR_TIMEOUT", "User provided timeout passed"},
	ERROR_IRQ_ISSUE:               {"NVML_ERROR_IRQ_ISSUE", "NVIDIA Kernel detected an interrupt issue with a GPU"},
	ERROR_LIBRARY_NOT_FOUND:       {"NVML_ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library couldn't be found or loaded"},
	ERROR_FUNCTION_NOT_FOUND:      {"NVML_ERROR_FUNCTION_NOT_FOUND", "Local version of NVML doesn't implement this function"},
	ERROR_CORRUPTED_INFOROM:       {"NVML_ERROR_CORRUPTED_INFOROM", "infoROM is corrupted"},
	ERROR_GPU_IS_LOST:             {"NVML_ERROR_GPU_IS_LOST", "The GPU has fallen off the bus or has otherwise become inaccessible"},
	ERROR_RESET_REQUIRED:          {"NVML_ERROR_RESET_REQUIRED", "The GPU requires a reset before it can be used again"},
	ERROR_OPERATING_SYSTEM:        {"NVML_ERROR_OPERATING_SYSTEM", "The GPU control device has been blocked by the operating system/cgroups"},
	ERROR_LIB_RM_VERSION_MISMATCH: {"NVML_ERROR_LIB_RM_VERSION_MISMATCH", "RM detects a driver/library version mismatch"},
	ERROR_IN_USE:                  {"NVML_ERROR_IN_USE", "An operation cannot be performed because the GPU is currently in use"},
	ERROR_MEMORY:                  {"NVML_ERROR_MEMORY", "Insufficient memory"},
	ERROR_NO_DATA:                 {"NVML_ERROR_NO_DATA", "No data"},
	ERROR_VGPU_ECC_NOT_SUPPORTED:  {"NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "The requested vgpu operation is not available on target device, because ECC is enabled"},
	ERROR_INSUFFICIENT_RESOURCES:  {"NVML_ERROR_INSUFFICIENT_RESOURCES", "Ran out of critical resources, other than memory"},
	// nvml.h's comment here repeats INSUFFICIENT_RESOURCES's; this says what the name says.
	ERROR_FREQ_NOT_SUPPORTED:        {"NVML_ERROR_FREQ_NOT_SUPPORTED", "The requested frequency is not supported"},
	ERROR_ARGUMENT_VERSION_MISMATCH: {"NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "The provided version is invalid/unsupported"},
	ERROR_DEPRECATED:                {"NVML_ERROR_DEPRECATED", "The requested functionality has been deprecated"},
	ERROR_NOT_READY:                 {"NVML_ERROR_NOT_READY", "The system is not ready for the request"},
	ERROR_GPU_NOT_FOUND:             {"NVML_ERROR_GPU_NOT_FOUND", "No GPUs were found"},
	ERROR_INVALID_STATE:             {"NVML_ERROR_INVALID_STATE", "Resource not in correct state to perform requested operation"},
	ERROR_RESET_TYPE_NOT_SUPPORTED:  {"NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", "Reset not supported for given device/parameters"},
	ERROR_UNKNOWN:                   {"NVML_ERROR_UNKNOWN", "An internal driver error occurred"},
}

// Error returns "<C name>: <description>", e.g. "NVML_ERROR_NOT_SUPPORTED: the requested
// operation is not available on target device".
func (r Return) Error() string {
	d := r.Description()
	// Go error strings start in lower case; a leading initialism ("NVML", "RM") stays.
	if len(d) > 1 && 'A' <= d[0] && d[0] <= 'Z' {
		first, _, _ := strings.Cut(d[1:], " ")
		if strings.ToLower(first) == first {
			d = string(d[0]-'A'+'a') + d[1:]
		}
	}
	return r.Name() + ": " + d
}

// Name returns the C name of r, such as "NVML_ERROR_NOT_SUPPORTED", or "nvmlReturn_t(N)"
// for a value this package does not know (one added by a newer NVML).
func (r Return) Name() string {
	if e, ok := returns[r]; ok {
		return e[0]
	}
	return "nvmlReturn_t(" + strconv.Itoa(int(r)) + ")"
}

// Description returns nvml.h's one-line description of r, or "Unknown result" for a value
// this package does not know.
func (r Return) Description() string {
	if e, ok := returns[r]; ok {
		return e[1]
	}
	return "Unknown result"
}

// String returns the same as Name.
func (r Return) String() string { return r.Name() }

// ReturnOf returns the NVML result inside err, and false if it holds none. A library that
// could not be loaded reports ERROR_LIBRARY_NOT_FOUND, a missing entry point
// ERROR_FUNCTION_NOT_FOUND.
func ReturnOf(err error) (Return, bool) {
	var r Return
	if errors.As(err, &r) {
		return r, true
	}
	return 0, false
}
