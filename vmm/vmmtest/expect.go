package vmmtest

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cuvmm/cuvmm/cu"
)

// EnvRecord names the file the suite writes observed results to, instead of asserting them.
const EnvRecord = "CUVMM_VMMTEST_RECORD"

//go:embed testdata/expectations.json
var expectationsJSON []byte

// Expectations are results recorded on a real driver: for each case name, the CUresult
// name it returned ("CUDA_SUCCESS" for no error), or for a case that observes a fact (where
// a reservation landed, what a query returned: "CUDA_SUCCESS: value"), the fact.
type Expectations struct {
	Driver  int               `json:"driver"` // cuDriverGetVersion of the recording
	Device  string            `json:"device"` // device 0's name
	Note    string            `json:"note,omitempty"`
	Results map[string]string `json:"results"` // case name -> CUresult name or fact
	// Unrecorded names the cases no recording has a result for yet, with why. The suite
	// logs what a backend returns for them and asserts nothing; recording fills them in.
	Unrecorded map[string]string `json:"unrecorded,omitempty"`
}

// Deviation is a result a backend knowingly returns where the driver returned another, with
// why; see Capabilities.Deviations.
type Deviation struct {
	Got string // what the backend returns, in the form of Expectations.Results
	Why string
}

// Recorded returns the expectations embedded in this package.
func Recorded() (*Expectations, error) {
	var e Expectations
	if err := json.Unmarshal(expectationsJSON, &e); err != nil {
		return nil, fmt.Errorf("vmmtest: testdata/expectations.json: %w", err)
	}
	if e.Results == nil {
		e.Results = map[string]string{}
	}
	for name := range e.Unrecorded {
		if _, ok := e.Results[name]; ok {
			return nil, fmt.Errorf("vmmtest: testdata/expectations.json: %s is both recorded and unrecorded", name)
		}
	}
	return &e, nil
}

// resultName is the CUresult name an error carries: CUDA_SUCCESS for nil, the Result's name
// otherwise, and "GO_ERROR: ..." for errors that carry no driver result.
func resultName(err error) string {
	if err == nil {
		return cu.SUCCESS.Name()
	}
	if r, ok := cu.ResultOf(err); ok {
		return r.Name()
	}
	return "GO_ERROR: " + err.Error()
}

// checker compares or records results.
type checker struct {
	exp    *Expectations
	record bool
	dev    map[string]Deviation // the backend's declared deviations (not used when recording)
	mu     sync.Mutex
	seen   map[string]string
}

func (c *checker) check(t testing.TB, name string, err error) {
	t.Helper()
	c.observe(t, name, resultName(err), err)
}

// observe compares (or records) a fact that is not a result: where a reservation landed
// relative to another, whether a hint was honoured. err, if any, is shown on a mismatch.
func (c *checker) observe(t testing.TB, name, got string, err error) {
	t.Helper()
	c.mu.Lock()
	c.seen[name] = got
	c.mu.Unlock()
	if c.record {
		t.Logf("%s: %s (%v)", name, got, err)
		return
	}
	want, ok := c.exp.Results[name]
	if !ok {
		if why, ok := c.exp.Unrecorded[name]; ok {
			t.Logf("%s: not recorded yet (%s); this backend returned %s (%v)", name, why, got, err)
			return
		}
		t.Errorf("%s: no recorded expectation (this backend returned %s: %v)", name, got, err)
		return
	}
	if d, ok := c.dev[name]; ok {
		switch got {
		case d.Got:
		case want:
			t.Errorf("%s: the backend declares the deviation %q (%s) but returned %s, as the driver did: remove the deviation", name, d.Got, d.Why, got)
		default:
			t.Errorf("%s: got %s; the driver (%d, %s) returned %s and the backend declares it returns %s (%s); error: %v", name, got, c.exp.Driver, c.exp.Device, want, d.Got, d.Why, err)
		}
		return
	}
	if got != want {
		t.Errorf("%s: got %s, the driver (%d, %s) returned %s; error: %v", name, got, c.exp.Driver, c.exp.Device, want, err)
	}
}

// checkValue compares (or records) a call's result and, when it succeeded, what it returned:
// "CUDA_SUCCESS: value".
func (c *checker) checkValue(t testing.TB, name string, err error, value string) {
	t.Helper()
	if err != nil {
		c.check(t, name, err)
		return
	}
	c.observe(t, name, resultName(nil)+": "+value, nil)
}

// either is the fact of a case that asks a yes-or-no question: yes when cond holds, no otherwise.
func either(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

// checkDeviations reports declared deviations that deviate from nothing.
func checkDeviations(t testing.TB, exp *Expectations, devs map[string]Deviation) {
	t.Helper()
	for name, d := range devs {
		want, ok := exp.Results[name]
		switch {
		case !ok:
			t.Errorf("deviation %s: no recorded result to deviate from", name)
		case d.Got == want:
			t.Errorf("deviation %s: declares %s, which is what the driver returned", name, want)
		case d.Why == "":
			t.Errorf("deviation %s: no reason given", name)
		}
	}
}

// group is the group a case name belongs to: what comes before its first slash.
func group(name string) string {
	g, _, _ := strings.Cut(name, "/")
	return g
}

// unreached returns, sorted, the declared deviations that no case reached although their
// group ran to the end (ran: group name -> ran to the end, neither skipped nor failed).
func (c *checker) unreached(ran map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for name := range c.dev {
		if _, ok := c.seen[name]; !ok && ran[group(name)] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func (c *checker) write(path string, driver int, device string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Expectations{Driver: driver, Device: device, Results: c.seen, Unrecorded: map[string]string{}}
	// Keep earlier results of cases this run skipped (other capabilities, other machines),
	// the note, and the cases still unrecorded.
	if prev, err := os.ReadFile(path); err == nil {
		var old Expectations
		if json.Unmarshal(prev, &old) == nil {
			out.Note = old.Note
			for k, v := range old.Results {
				if _, ok := out.Results[k]; !ok {
					out.Results[k] = v
				}
			}
			for k, why := range old.Unrecorded {
				if _, ok := out.Results[k]; !ok {
					out.Unrecorded[k] = why
				}
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
