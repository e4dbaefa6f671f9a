package cu

import "strconv"

// Result is a CUresult: the status every driver call returns. It implements error.
//
// Each code has one name, the C name less "CUDA_" (ERROR_INVALID_VALUE for
// CUDA_ERROR_INVALID_VALUE, and so on), and that constant is the value to test for: a Result
// wrapped by fmt.Errorf("...: %w", err) still matches it with errors.Is.
type Result int32

// Error returns "<C name>: <description>", e.g. "CUDA_ERROR_INVALID_VALUE: one or more of
// the parameters passed to the API call is not within an acceptable range of values".
func (r Result) Error() string {
	d := r.Description()
	// Go error strings start in lower case; leave a leading initialism ("PTX", "CUDA") or
	// identifier alone.
	if len(d) > 1 && 'A' <= d[0] && d[0] <= 'Z' {
		lower := true
		for i := 1; i < len(d) && d[i] != ' '; i++ {
			if d[i] < 'a' || d[i] > 'z' {
				lower = false
				break
			}
		}
		if lower {
			d = string(d[0]-'A'+'a') + d[1:]
		}
	}
	return r.Name() + ": " + d
}

// Name returns the C name of r, such as "CUDA_ERROR_INVALID_VALUE", or "CUresult(N)" for a
// code this package does not know (one added by a newer driver).
func (r Result) Name() string {
	if n, ok := resultName(r); ok {
		return n
	}
	return "CUresult(" + strconv.Itoa(int(r)) + ")"
}

// Description returns the one-line description of r from the CUDA header, or "Unknown
// result" for a code this package does not know.
func (r Result) Description() string {
	if d, ok := resultDescription(r); ok {
		return d
	}
	return "Unknown result"
}

// String returns the same as Name.
func (r Result) String() string { return r.Name() }

// resultOf converts the raw return register of a driver call to an error: nil for
// CUDA_SUCCESS, the Result otherwise. CUresult is a C enum, so only the low 32 bits of the
// register are defined; the rest may hold garbage.
func resultOf(r uintptr) error {
	res := Result(int32(uint32(r)))
	if res == SUCCESS {
		return nil
	}
	return res
}
