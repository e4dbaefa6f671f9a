package vmmtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Fatalf was given instead of stopping.
type recorder struct {
	testing.TB
	fatal []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
}

func TestMust(t *testing.T) {
	cases := []struct {
		name string
		call func(tb testing.TB)
		want string // "" when the assertion holds
	}{
		{"noError/nil", func(tb testing.TB) { noError(tb, nil) }, ""},
		{"noError/err", func(tb testing.TB) { noError(tb, errors.New("boom"), "create %d", 4096) }, "create 4096: unexpected error: boom"},
		{"isError/err", func(tb testing.TB) { isError(tb, errors.New("boom")) }, ""},
		{"isError/nil", func(tb testing.TB) { isError(tb, nil, "bind") }, "bind: an error was expected, got none"},
		{"equal/same", func(tb testing.TB) { equal(tb, 3, 3) }, ""},
		{"equal/differ", func(tb testing.TB) { equal(tb, 3, 4, "count") }, "count: not equal:\n\twant: 3 (3)\n\tgot:  4 (4)"},
		{"notEqual/differ", func(tb testing.TB) { notEqual(tb, "a", "b") }, ""},
		{"notEqual/same", func(tb testing.TB) { notEqual(tb, "a", "a") }, `got "a" (a), which it must not be`},
		{"isZero/zero", func(tb testing.TB) { isZero(tb, uint64(0)) }, ""},
		{"isZero/nonzero", func(tb testing.TB) { isZero(tb, uint64(8), "granularity %d", 8) }, "granularity 8: got 0x8 (8), want zero"},
		{"notZero/nonzero", func(tb testing.TB) { notZero(tb, 1) }, ""},
		{"notZero/zero", func(tb testing.TB) { notZero(tb, uint64(0)) }, "got zero uint64, want a value"},
		{"message/values", func(tb testing.TB) { noError(tb, errors.New("x"), 1, 2) }, "1 2: unexpected error: x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{TB: t}
			c.call(r)
			switch {
			case c.want == "" && len(r.fatal) != 0:
				t.Fatalf("the assertion failed: %q", r.fatal)
			case c.want != "" && (len(r.fatal) != 1 || !strings.Contains(r.fatal[0], c.want)):
				t.Fatalf("got %q, want one failure saying %q", r.fatal, c.want)
			}
		})
	}
}
