package units

import (
	"math"
	"testing"
)

func TestSize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0B", 3000: "3000B", 1024: "1KiB", 2 << 20: "2MiB", 3 << 20: "3MiB",
		64 << 30: "64GiB", 1<<20 + 1: "1048577B", 1 << 60: "1EiB", 1 << 63: "8EiB",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestAlignUp(t *testing.T) {
	for _, c := range []struct {
		n, align, want uint64
		ok             bool
	}{
		{0, 2 << 20, 0, true},
		{1, 2 << 20, 2 << 20, true},
		{2 << 20, 2 << 20, 2 << 20, true},
		{5, 0, 5, true},
		{5, 1, 5, true},
		{math.MaxUint64 - 10, 2 << 20, 0, false},
		{math.MaxUint64 &^ (2<<20 - 1), 2 << 20, math.MaxUint64 &^ (2<<20 - 1), true},
	} {
		got, ok := AlignUp(c.n, c.align)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("AlignUp(%#x, %#x) = %#x, %v; want %#x, %v", c.n, c.align, got, ok, c.want, c.ok)
		}
	}
}
