package vmmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// reporter is a testing.TB that keeps what Errorf and Logf were given.
type reporter struct {
	testing.TB
	errors, logs []string
}

func (r *reporter) Helper() {}
func (r *reporter) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *reporter) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func TestEmbeddedExpectations(t *testing.T) {
	exp, err := Recorded()
	noError(t, err)
	notZero(t, len(exp.Results))
	for name := range exp.Results {
		if !strings.Contains(name, "/") {
			t.Errorf("%s: a case name is group/case", name)
		}
	}
}

func TestDeviations(t *testing.T) {
	exp := &Expectations{
		Driver:     13000,
		Device:     "NVIDIA H200",
		Results:    map[string]string{"g/a": "CUDA_SUCCESS", "g/b": "CUDA_ERROR_INVALID_VALUE", "h/c": "CUDA_SUCCESS"},
		Unrecorded: map[string]string{"g/u": "not yet"},
	}
	devs := map[string]Deviation{"g/b": {Got: "CUDA_SUCCESS", Why: "sim is kinder"}}
	observe := func(name, got string) *reporter {
		r := &reporter{TB: t}
		c := &checker{exp: exp, dev: devs, seen: map[string]string{}}
		c.observe(r, name, got, nil)
		return r
	}
	cases := []struct {
		desc, name, got string
		wantError       string // "" when the observation passes
	}{
		{"recorded", "g/a", "CUDA_SUCCESS", ""},
		{"differs", "g/a", "CUDA_ERROR_UNKNOWN", "the driver (13000, NVIDIA H200) returned CUDA_SUCCESS"},
		{"declared-deviation", "g/b", "CUDA_SUCCESS", ""},
		{"deviation-gone", "g/b", "CUDA_ERROR_INVALID_VALUE", "remove the deviation"},
		{"deviation-other", "g/b", "CUDA_ERROR_UNKNOWN", "declares it returns CUDA_SUCCESS (sim is kinder)"},
		{"unrecorded", "g/u", "CUDA_SUCCESS", ""},
		{"unknown", "g/x", "CUDA_SUCCESS", "no recorded expectation"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			r := observe(tc.name, tc.got)
			switch {
			case tc.wantError == "" && len(r.errors) != 0:
				t.Fatalf("errors %q, want none", r.errors)
			case tc.wantError != "" && (len(r.errors) != 1 || !strings.Contains(r.errors[0], tc.wantError)):
				t.Fatalf("errors %q, want one saying %q", r.errors, tc.wantError)
			}
		})
	}
	if r := observe("g/u", "CUDA_SUCCESS"); len(r.logs) != 1 || !strings.Contains(r.logs[0], "not recorded yet (not yet)") {
		t.Fatalf("an unrecorded case logs why: %q", r.logs)
	}

	r := &reporter{TB: t}
	checkDeviations(r, exp, map[string]Deviation{
		"g/a": {Got: "CUDA_SUCCESS", Why: "same as the driver"},
		"g/u": {Got: "CUDA_SUCCESS", Why: "nothing recorded"},
		"h/c": {Got: "CUDA_ERROR_UNKNOWN"},
		"g/b": {Got: "CUDA_SUCCESS", Why: "fine"},
	})
	if len(r.errors) != 3 || !strings.Contains(strings.Join(r.errors, "\n"), "which is what the driver returned") ||
		!strings.Contains(strings.Join(r.errors, "\n"), "no recorded result") || !strings.Contains(strings.Join(r.errors, "\n"), "no reason") {
		t.Fatalf("checkDeviations: %q", r.errors)
	}

	c := &checker{exp: exp, dev: map[string]Deviation{"g/b": {}, "h/c": {}, "k/d": {}}, seen: map[string]string{"h/c": "x"}}
	equal(t, "[g/b]", fmt.Sprint(c.unreached(map[string]bool{"g": true, "h": true, "k": false})), "unreached deviations")
}

func TestWriteKeepsNoteAndUnrecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "expectations.json")
	old := Expectations{Driver: 12000, Device: "old", Note: "how it was recorded",
		Results:    map[string]string{"g/kept": "CUDA_SUCCESS", "g/redone": "CUDA_ERROR_UNKNOWN"},
		Unrecorded: map[string]string{"g/new": "not yet", "g/still": "not yet"}}
	b, err := json.Marshal(old)
	noError(t, err)
	noError(t, os.WriteFile(path, b, 0o644))
	c := &checker{record: true, seen: map[string]string{"g/redone": "CUDA_SUCCESS", "g/new": "CUDA_SUCCESS"}}
	noError(t, c.write(path, 13000, "NVIDIA H200"))
	b, err = os.ReadFile(path)
	noError(t, err)
	var got Expectations
	noError(t, json.Unmarshal(b, &got))
	want := Expectations{Driver: 13000, Device: "NVIDIA H200", Note: "how it was recorded",
		Results:    map[string]string{"g/kept": "CUDA_SUCCESS", "g/redone": "CUDA_SUCCESS", "g/new": "CUDA_SUCCESS"},
		Unrecorded: map[string]string{"g/still": "not yet"}}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("wrote %+v, want %+v", got, want)
	}
}
