package vmmtest

import (
	"fmt"
	"testing"
)

// The suite's assertions. They live here, on the standard library alone, because users import
// vmmtest into their own test builds: an assertion library would come along with it.

// msgPrefix formats the optional message of an assertion: a format string and its arguments,
// or any values printed as they are. It ends in ": " when there is one.
func msgPrefix(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...) + ": "
	}
	return fmt.Sprint(msgAndArgs...) + ": "
}

// noError stops the test when err is not nil.
func noError(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%sunexpected error: %v", msgPrefix(msgAndArgs), err)
	}
}

// isError stops the test when err is nil.
func isError(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("%san error was expected, got none", msgPrefix(msgAndArgs))
	}
}

// equal stops the test when got is not want.
func equal[T comparable](t testing.TB, want, got T, msgAndArgs ...any) {
	t.Helper()
	if got != want {
		t.Fatalf("%snot equal:\n\twant: %#v (%v)\n\tgot:  %#v (%v)", msgPrefix(msgAndArgs), want, want, got, got)
	}
}

// notEqual stops the test when got is the value it must not be.
func notEqual[T comparable](t testing.TB, unwanted, got T, msgAndArgs ...any) {
	t.Helper()
	if got == unwanted {
		t.Fatalf("%sgot %#v (%v), which it must not be", msgPrefix(msgAndArgs), got, got)
	}
}

// isZero stops the test when v is not its type's zero value.
func isZero[T comparable](t testing.TB, v T, msgAndArgs ...any) {
	t.Helper()
	var zero T
	if v != zero {
		t.Fatalf("%sgot %#v (%v), want zero", msgPrefix(msgAndArgs), v, v)
	}
}

// notZero stops the test when v is its type's zero value.
func notZero[T comparable](t testing.TB, v T, msgAndArgs ...any) {
	t.Helper()
	var zero T
	if v == zero {
		t.Fatalf("%sgot zero %T, want a value", msgPrefix(msgAndArgs), v)
	}
}

// errOf is the error of a call whose value a case does not look at.
func errOf[T any](_ T, err error) error { return err }
