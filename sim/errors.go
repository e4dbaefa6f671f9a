package sim

import (
	"fmt"

	"github.com/cuvmm/cuvmm/cu"
)

// Error is the error of a failed simulated driver call: the driver function, its arguments,
// and the result the real driver returns in that situation. It unwraps to that result (or to
// cu.ErrInvalidArgument for the checks package cu makes before calling the driver), so
// cu.ResultOf and errors.Is(err, cu.ERROR_INVALID_VALUE) behave as on the real driver.
type Error struct {
	Op     string // the driver function, e.g. "cuMemMap"
	Args   string // its arguments, formatted for people
	Err    error  // a cu.Result, or cu.ErrInvalidArgument
	Reason string // why sim rejected the call, for people
}

func (e *Error) Error() string {
	s := "sim: " + e.Op + "(" + e.Args + "): " + e.Err.Error()
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// failure is a rejected call before its operation and arguments are attached: the
// validation helpers return it and the exported method names the call once, so argument
// formatting is only paid for on failure. An error in raw is returned as it is.
type failure struct {
	err    error
	reason string
	raw    error
}

func fail(r cu.Result, reason string) *failure { return &failure{err: r, reason: reason} }

// argFail is a check that package cu makes in Go before calling the driver (empty host
// buffers, zero sizes, nil properties): it matches cu.ErrInvalidArgument and
// cu.ERROR_INVALID_VALUE as cu's own error does.
func argFail(reason string) *failure { return &failure{err: cu.ErrInvalidArgument, reason: reason} }

func (f *failure) wrap(op, format string, args ...any) error {
	if f == nil {
		return nil
	}
	if f.raw != nil {
		return f.raw
	}
	return &Error{Op: op, Args: fmt.Sprintf(format, args...), Err: f.err, Reason: f.reason}
}

// The results of situations where the documentation and the recordings leave room: each is
// named once here so that a recording that disagrees is a one-line change.
var (
	// A copy or memset through a mapping the copying device may not access (no access, or
	// read-only for a destination), recorded: vmmtest dangerous/no-access-htod,
	// dangerous/read-only-htod, faults/htod-h3-read-only.
	resNoAccess = cu.ERROR_INVALID_VALUE
	// cuMemImportFromShareableHandle of a descriptor that is closed or not an allocation,
	// recorded: vmmtest share/import-closed-fd, share/import-non-cuda-fd.
	resBadFD = cu.ERROR_UNKNOWN
	// cuMemImportFromShareableHandle of a fabric handle without an IMEX channel, recorded:
	// vmmtest walk/import-fabric-zero.
	resFabricImportNoIMEX = cu.ERROR_NOT_SUPPORTED
	// cuMemCreate with MEM_HANDLE_TYPE_FABRIC and no IMEX channel, recorded: vmmtest
	// fabric/create-without-imex.
	resFabricNoIMEX = cu.ERROR_NOT_PERMITTED
	// A fabric handle that names no allocation (with IMEX), recorded: vmmtest
	// fabric/import-made-up, fabric/import-after-release.
	resBadFabric = cu.ERROR_NOT_SUPPORTED
	// cuMemSetAccess giving a device access to memory of a device it has no peer access to:
	// not recorded.
	resNoPeer = cu.ERROR_INVALID_DEVICE
	// cuMemGetAddressRange of an address in no mapping, or in one no device may access,
	// recorded: vmmtest data/address-range-unmapped, faults/address-range-h2.
	resNotFound = cu.ERROR_NOT_FOUND
	// A handle type the device does not support (cuMemCreate, cuMulticastCreate): WIN32 on
	// Linux, recorded: vmmtest create/handle-type-win32-on-linux.
	resBadHandleType = cu.ERROR_INVALID_VALUE
	// Binding or mapping a multicast object whose team is incomplete (the driver blocks
	// instead): not recorded, multicast cannot be tried on shared machines.
	resTeamIncomplete = cu.ERROR_ILLEGAL_STATE
	// MEM_HANDLE_TYPE_FABRIC on a device without fabric support: not recorded.
	resNoFabric = cu.ERROR_NOT_SUPPORTED
)

// Explain is why sim refused the call, for vmm.Error's message (vmm.Explainer).
func (e *Error) Explain() string { return e.Reason }
