// Package units formats and rounds the byte counts that cuvmm's packages put in their
// errors and use for alignment.
package units

import "strconv"

var suffixes = [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Size formats a byte count the way cuvmm's error messages do: exact binary units where
// they divide evenly (2MiB, 64GiB), bytes otherwise (3000B).
func Size(n uint64) string {
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(suffixes)-1 {
		n /= 1024
		i++
	}
	return strconv.FormatUint(n, 10) + suffixes[i]
}

// AlignUp rounds n up to a multiple of align, a power of two (0 and 1 leave n as it is);
// ok is false when the result does not fit in 64 bits.
func AlignUp(n, align uint64) (r uint64, ok bool) {
	if align <= 1 {
		return n, true
	}
	r = (n + align - 1) &^ (align - 1)
	return r, r >= n
}
